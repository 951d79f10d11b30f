"""Low-rank factorization's options (their fields become ``compress run`` flags), importable without torch."""

from __future__ import annotations

from dataclasses import dataclass, field

from compress.errors import CompressError

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

    def __post_init__(self) -> None:
        """Every check of the options alone: a bad one is refused as it is given, before anything is loaded."""
        if self.weighting not in WEIGHTINGS:
            raise CompressError(f"--weighting must be one of {', '.join(WEIGHTINGS)}, got {self.weighting!r}.")
        if self.allocation not in ALLOCATIONS:
            raise CompressError(f"--allocation must be one of {', '.join(ALLOCATIONS)}, got {self.allocation!r}.")
        if not 0 < self.keep <= 1:
            raise CompressError(f"--keep is the share of the matrices' parameters to keep and must be in (0, 1], "
                                f"got {self.keep}.")
        for flag, value in (("--rank", self.rank), ("--embedding-rank", self.embedding_rank)):
            if value is not None and value < 1:
                raise CompressError(f"{flag} must be a positive integer, got {value}.")
        for flag, value, least in (("--calibration-examples", self.calibration_examples, 1),
                                   ("--recovery-epochs", self.recovery_epochs, 0)):
            if value < least:
                raise CompressError(f"{flag} must be an integer >= {least}, got {value}.")
        if not self.recovery_lr > 0:
            raise CompressError(f"--recovery-lr must be positive, got {self.recovery_lr}.")
