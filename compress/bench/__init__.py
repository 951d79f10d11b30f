"""Measuring compressed models: latency, memory growth and the machine a number was taken on.

Numbers about speed mean little without the machine, thread count and versions behind them,
so every measurement is meant to be stored next to a :func:`manifest`.
"""

from compress._lazy import exports

# Imported when first asked for, so importing one submodule stays as cheap as that submodule.
__getattr__, __dir__, __all__ = exports(__name__, {
    "machine": ["cpu_features", "cpu_model", "git_commit", "git_dirty", "manifest", "package_versions"],
    "memory": ["peak_memory_bytes", "rss_bytes"],
    "timing": ["Timing", "default_threads", "fixed_threads", "time_call"],
})
