"""What every backend returns: a predictor, logits from token ids, run the same way by the evaluator and the benchmark.

A predictor takes a batch of numpy ``int64`` arrays (``input_ids``, ``attention_mask``,
``token_type_ids``, each ``[batch, length]``) and returns float32 logits ``[batch, labels]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from compress.bench.measurement import Predictor
from compress.models.config import INPUT_NAMES
from compress.quantize.ort_predictor import SLOW_FUSIONS, OrtPredictor, ort_gpu_unavailable, ort_session
from compress.quantize.renumbered import RenumberedPredictor, renumbering

# ONNX Runtime's predictor and the renumbering need no torch and live apart (what `compress predict` imports); they
# are named here too, beside every other backend's predictor.
__all__ = ["SLOW_FUSIONS", "OrtPredictor", "Predictor", "RenumberedPredictor", "TorchPredictor", "ort_gpu_unavailable",
           "ort_session", "predict_batches", "renumbering"]


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


def predict_batches(predictor: Predictor,
                    batches: Iterable[Mapping[str, torch.Tensor]]) -> tuple[np.ndarray, np.ndarray]:
    """Logits and gold labels of ``predictor`` over collated batches (torch tensors, as the data loaders give)."""
    logits, labels = [], []
    for batch in batches:
        logits.append(predictor({k: batch[k].numpy() for k in INPUT_NAMES}))
        labels.append(batch["labels"].numpy())
    return np.concatenate(logits), np.concatenate(labels)


