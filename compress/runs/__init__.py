"""Carrying runs out: what one run is asked to do (config), a student method's run (distillation),
a quantization run, a pipeline of runs (pipeline), and a comparison of many (compare).

Every run writes one run directory atomically; the CLI and ``compare`` call :func:`run`.
"""

from compress._lazy import exports

# Imported when first asked for, so importing one submodule stays as cheap as that submodule.
__getattr__, __dir__, __all__ = exports(__name__, {
    "config": ["RunConfig", "RunResult"],
    "pipeline": ["run"],
})
