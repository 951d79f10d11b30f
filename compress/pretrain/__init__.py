"""Pre-training an ALBERT-shaped encoder: masked LM with sentence-order or next-sentence prediction."""

from compress.pretrain.run import OBJECTIVES, PretrainConfig, PretrainResult, pretrain

__all__ = ["OBJECTIVES", "PretrainConfig", "PretrainResult", "pretrain"]
