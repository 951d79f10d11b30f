"""ONNX Runtime's predictor: a session with compress's settings, run on numpy arrays (no torch imported)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# ONNX Runtime fusions that make our CPU graphs slower. SkipLayerNormFusion merges the residual Add,
# the bias Add and LayerNorm into one kernel: on the int8 minilm (seq 64, 2 threads, AMD EPYC) it took
# 26 ms of 112 ms at batch 32, against 7 ms for LayerNorm and the Adds left apart; without it the
# model ran in 88 ms at batch 32 and 3.4 instead of 4.1 ms at batch 1.
SLOW_FUSIONS = ["SkipLayerNormFusion"]


def ort_gpu_unavailable() -> str | None:
    """None when ONNX Runtime can run on a GPU here (its CUDA execution provider), else why not (one sentence)."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        return None
    return (f"this ONNX Runtime ({ort.__version__}) has no CUDA execution provider: install onnxruntime-gpu in its "
            "place to time ONNX models on the GPU.")


def ort_session(path: Path, threads: int, save_optimized: Path | None = None, spinning: bool = False,
                device: str = "cpu") -> Any:
    """An ONNX Runtime CPU session on ``threads`` threads with every graph optimization but
    :data:`SLOW_FUSIONS`; ``save_optimized`` also writes the graph as optimized (to inspect it). Its worker threads
    do not spin-wait for the next call after one ends unless ``spinning`` (ONNX Runtime's default): spinning, they
    take the cores the model timed next needs, 5 to 11% of its batch-1 time here, and make a model alone up to 11%
    faster at batch 1 (``benchmarks/contamination.py``). Every speed compress measures, and the backend ``auto``
    chooses by it, is without spinning."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if not spinning:
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if save_optimized is not None:
        options.optimized_model_filepath = str(save_optimized)
    # On a GPU every node runs on CUDA or the session fails: a node left to the CPU would be timed as the GPU's.
    providers = ["CUDAExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]
    if device == "cuda":
        options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return ort.InferenceSession(str(path), options, providers=providers, disabled_optimizers=SLOW_FUSIONS)


@dataclass
class OrtPredictor:
    """An ONNX model run by ONNX Runtime's CPU execution provider with a fixed number of threads, or by its CUDA
    execution provider (``device`` cuda)."""

    path: Path
    threads: int
    dtype: str = "fp32"
    spinning: bool = False     # see ort_session
    backend: str = "onnxruntime"
    device: str = "cpu"
    session: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.session = ort_session(self.path, self.threads, spinning=self.spinning, device=self.device)
        self._inputs = [i.name for i in self.session.get_inputs()]

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        feeds = {k: np.ascontiguousarray(inputs[k], dtype=np.int64) for k in self._inputs}
        return self.session.run(["logits"], feeds)[0]

