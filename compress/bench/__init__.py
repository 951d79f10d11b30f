"""Measuring compressed models: latency, memory growth and the machine a number was taken on.

Numbers about speed mean little without the machine, thread count and versions behind them,
so every measurement is meant to be stored next to a :func:`manifest`.
"""

from compress.bench.machine import cpu_features, cpu_model, git_commit, git_dirty, manifest, package_versions
from compress.bench.memory import peak_memory_bytes, rss_bytes
from compress.bench.timing import Timing, default_threads, fixed_threads, time_call

__all__ = [
    "Timing",
    "cpu_features",
    "cpu_model",
    "default_threads",
    "fixed_threads",
    "git_commit",
    "git_dirty",
    "manifest",
    "package_versions",
    "peak_memory_bytes",
    "rss_bytes",
    "time_call",
]
