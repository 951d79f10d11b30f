"""What every backend returns: a predictor, logits from token ids, run the same way by the evaluator and the benchmark.

A predictor takes a batch of numpy ``int64`` arrays (``input_ids``, ``attention_mask``,
``token_type_ids``, each ``[batch, length]``) and returns float32 logits ``[batch, labels]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from compress.bench.measurement import Predictor
from compress.models.config import INPUT_NAMES


@dataclass
class TorchPredictor:
    """A PyTorch module (our Encoder, possibly quantized or cast) run on ``device``, the CPU or a GPU, eagerly or
    compiled by ``torch.compile`` (``compiled``). On a GPU a call copies the token ids there and the logits back,
    as a server does, so it returns when the GPU has finished: timing a call times the GPU's work."""

    model: nn.Module
    dtype: str = "fp32"
    backend: str = "torch"
    device: str = "cpu"
    compiled: bool = False

    def __post_init__(self) -> None:
        self.model.eval().to(self.device)
        self._forward = torch.compile(self.model) if self.compiled else self.model

    @torch.inference_mode()
    def __call__(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        tensors = {k: torch.from_numpy(np.ascontiguousarray(inputs[k], dtype=np.int64)).to(self.device)
                   for k in INPUT_NAMES}
        return self._forward(**tensors).logits.float().cpu().numpy()


@dataclass
class RenumberedPredictor:
    """A predictor whose model has its own vocabulary (``prune-vocab``), fed the teacher's token ids:
    ``table[teacher id]`` is the model's id of the same token (its [UNK] where it has none), so it can be
    timed on the very inputs every other model is timed on."""

    predictor: Predictor
    table: np.ndarray

    @property
    def backend(self) -> str:
        return self.predictor.backend

    @property
    def dtype(self) -> str:
        return self.predictor.dtype

    def __call__(self, inputs: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.predictor({**inputs, "input_ids": self.table[inputs["input_ids"]]})


def renumbering(teacher_vocab: Mapping[str, int], vocab: Mapping[str, int], unk: int) -> np.ndarray | None:
    """The teacher-id -> model-id table of :class:`RenumberedPredictor`; None when the vocabularies agree."""
    if vocab == teacher_vocab:
        return None
    table = np.full(max(teacher_vocab.values()) + 1, unk, dtype=np.int64)
    for token, old in teacher_vocab.items():
        table[old] = vocab.get(token, unk)
    return table


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


def predict_batches(predictor: Predictor,
                    batches: Iterable[Mapping[str, torch.Tensor]]) -> tuple[np.ndarray, np.ndarray]:
    """Logits and gold labels of ``predictor`` over collated batches (torch tensors, as the data loaders give)."""
    logits, labels = [], []
    for batch in batches:
        logits.append(predictor({k: batch[k].numpy() for k in INPUT_NAMES}))
        labels.append(batch["labels"].numpy())
    return np.concatenate(logits), np.concatenate(labels)


