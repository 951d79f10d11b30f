"""Low-rank factorization's options (their fields become ``compress run`` flags), importable without torch."""

from __future__ import annotations

from dataclasses import dataclass, field

WEIGHTINGS = ("svd", "fisher", "activation")
ALLOCATIONS = ("energy", "uniform")


@dataclass
class LowRankOptions:
    weighting: str = field(default="fisher", metadata={
        "help": "what the factors keep best: svd (the weights' own energy), fisher (the rows the task loss is "
                "sensitive to, FWSVD) or activation (the directions the layer's real inputs use, SVD-LLM)."})
    keep: float = field(default=0.6, metadata={
        "help": "share of the attention and FFN matrices' parameters to keep, in (0, 1] (default 0.6); 1 keeps every "
                "one whole, so that --embedding-rank factorizes the token embedding alone.",
        "search": (1.0, 0.8, 0.6, 0.4)})
    allocation: str = field(default="energy", metadata={
        "help": "how --keep is shared out: energy (one budget for all matrices, each next rank to the matrix it "
                "keeps the most weighted energy of per parameter) or uniform (the same share of every matrix)."})
    rank: int | None = field(default=None, metadata={
        "help": "one rank for every matrix instead of --keep (a matrix whose break-even rank is lower stays dense)."})
    embedding_rank: int | None = field(default=None, metadata={
        "help": "also factorize the token embedding: V x E -> V x r + r x E (ALBERT's factorization, after the "
                "fact); default: keep it whole.", "search": (None, 160, 128)})
    calibration_examples: int = field(default=512, metadata={
        "help": "training examples the Fisher weights or input statistics are measured on (default 512)."})
    recovery_epochs: int = field(default=2, metadata={
        "help": "epochs of distillation from the unfactorized model (0: training-free)."})
    recovery_lr: float = field(default=5e-5, metadata={"help": "learning rate of the recovery (default 5e-5)."})
