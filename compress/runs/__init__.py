"""Carrying runs out: what one run is asked to do (config), a student method's run (distillation),
a quantization run, a pipeline of runs (pipeline), and a comparison of many (compare).

Every run writes one run directory atomically; the CLI and ``compare`` call :func:`run`.
"""

from compress.runs.config import RunConfig, RunResult
from compress.runs.pipeline import run

__all__ = ["RunConfig", "RunResult", "run"]
