"""compress: build, train and compare compressed students of BERT-family teachers.

``compress.load(RUN_DIR)`` loads a finished run's model to answer (:func:`compress.inference.loaded.load_run`)::

    model = compress.load("runs/minilm-mr-distilbert")
    model(["a gripping, funny film"])        # [{"label": "positive", "score": 0.97}]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compress.inference.loaded import LoadedRun

__version__ = "0.1.0"


def load(run_dir: Any, *, threads: int | None = None) -> LoadedRun:
    """A finished run's model on its own runtime, ready to answer (see :class:`compress.inference.loaded.LoadedRun`).
    Imported when called, so ``import compress`` stays light; a model on ONNX Runtime or OpenVINO loads and answers
    without importing torch, transformers or datasets."""
    from compress.inference.loaded import load_run

    return load_run(run_dir, threads=threads)
