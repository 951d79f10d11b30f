"""Wall-clock latency of a callable, and a fixed torch thread count to measure it under."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Timing:
    """Latency percentiles of one batch, in milliseconds, over ``runs`` timed calls."""

    p50_ms: float
    p90_ms: float
    mean_ms: float
    runs: int
    batch_size: int

    @property
    def throughput(self) -> float:
        """Examples per second at the median latency (the median resists one slow outlier)."""
        if self.p50_ms <= 0:
            return float("inf")
        return self.batch_size / (self.p50_ms / 1000)

    def to_dict(self) -> dict[str, float | int]:
        """The fields plus ``throughput``, ready for JSON."""
        return {**asdict(self), "throughput": self.throughput}


def _check_args(batch_size: int, warmup: int, repeats: int, min_seconds: float) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if warmup < 0:
        raise ValueError(f"warmup must be 0 or more, got {warmup}")
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if min_seconds < 0:
        raise ValueError(f"min_seconds must be 0 or more, got {min_seconds}")


def _timed_runs(fn: Callable[[], object], repeats: int, min_seconds: float) -> list[float]:
    """Durations in seconds: at least ``repeats`` calls, and more until ``min_seconds`` have passed."""
    durations: list[float] = []
    start = time.perf_counter()
    while len(durations) < repeats or time.perf_counter() - start < min_seconds:
        before = time.perf_counter()
        fn()
        durations.append(time.perf_counter() - before)
    return durations


def timed_calls(fn: Callable[[], object], *, warmup: int, repeats: int, min_seconds: float = 0.0) -> np.ndarray:
    """Every timed call's duration in milliseconds: ``repeats`` calls (and more until ``min_seconds`` have passed)
    after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    return np.asarray(_timed_runs(fn, repeats, min_seconds)) * 1000


def time_call(
    fn: Callable[[], object],
    *,
    batch_size: int,
    warmup: int = 5,
    repeats: int = 30,
    min_seconds: float = 0.0,
) -> Timing:
    """Time ``fn`` (one batch of ``batch_size`` examples) after ``warmup`` untimed calls.

    Warm-up calls absorb one-off costs (lazy initialisation, allocator growth, kernel
    selection) that would otherwise inflate the first timed runs.
    """
    _check_args(batch_size, warmup, repeats, min_seconds)
    ms = timed_calls(fn, warmup=warmup, repeats=repeats, min_seconds=min_seconds)
    return Timing(
        p50_ms=float(np.percentile(ms, 50)),
        p90_ms=float(np.percentile(ms, 90)),
        mean_ms=float(ms.mean()),
        runs=int(ms.size),
        batch_size=batch_size,
    )


def default_threads() -> int:
    """Threads to benchmark with: the CPUs this process may use, capped at 4.

    The cap keeps numbers comparable across machines and leaves room for other work.
    """
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on every platform
        available = os.cpu_count() or 1
    return max(1, min(available, 4))


@contextmanager
def fixed_threads(n: int) -> Iterator[int]:
    """Run the block with ``torch.set_num_threads(n)``, restoring the previous count afterwards."""
    if n < 1:
        raise ValueError(f"thread count must be at least 1, got {n}")
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(previous)
