"""What ``compress pretrain`` is asked to do, importable without torch (``compress pretrain --help`` shows
these defaults); :mod:`compress.pretrain.run` and :mod:`compress.pretrain.downstream` re-export them."""

from __future__ import annotations

from dataclasses import dataclass

from compress.errors import CompressError
from compress.teachers.registry import DEFAULT_TEACHER
from compress.train_config import PRECISION_CHOICES

OBJECTIVES = ("sop", "nsp", "none")
INITS = ("teacher", "scratch")
# Lan et al. 2020, Table 5 (ALBERT-base, their corpus): accuracy in % on masked LM, NSP and SOP, by objective.
PAPER_TABLE5 = {"none": (54.9, 52.4, 53.3), "nsp": (54.5, 90.5, 52.0), "sop": (54.0, 78.9, 86.5)}


@dataclass
class PretrainConfig:
    """What to pre-train, on what, for how long (defaults sized to finish in minutes on 2 CPU cores)."""

    objective: str = "sop"
    corpus: str = "bbc-news"
    teacher: str = DEFAULT_TEACHER
    init: str = "teacher"
    embedding_size: int = 128
    sharing: str = "all"
    groups: int = 1
    # Two sentences a segment and 128 tokens a pair: one-sentence segments hold too few cues to their order (SOP
    # alone, at the teacher's shape: held-out 57% after 3 epochs against 63% with two; docs/tutorial.md, section 5).
    sentences_per_segment: int = 2
    max_length: int = 128
    max_pairs: int = 12000
    held_out_documents: int = 200
    # Sentence order is learned late: its loss sits at ln 2 for 250-600 steps and then falls; five
    # epochs (1,365 steps on BBC News) give it room after that (docs/tutorial.md, section 5).
    epochs: int = 5
    batch_size: int = 32
    lr: float = 1e-4
    # The masked-LM loss's weight against the sentence loss: at 1 the new masked-LM head's loss (8.5 nats falling to
    # 4.5) drives the encoder and the clipped gradient, and SOP stays at chance (docs/tutorial.md, section 5).
    mlm_weight: float = 0.1
    precision: str = "auto"   # auto: bf16 autocast where the device computes it natively, else fp32
    seed: int = 13

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise CompressError(f"unknown objective {self.objective!r}; use one of {', '.join(OBJECTIVES)}.")
        if self.init not in INITS:
            raise CompressError(f"unknown init {self.init!r}; use one of {', '.join(INITS)}.")
        for name in ("sentences_per_segment", "max_length", "max_pairs", "held_out_documents", "epochs",
                     "batch_size"):
            value = getattr(self, name)
            if value < 1:
                raise CompressError(f"--{name.replace('_', '-')} must be a positive integer, got {value}.")
        if not self.lr > 0:
            raise CompressError(f"--lr must be positive, got {self.lr}.")
        if not self.mlm_weight > 0:
            raise CompressError(f"--mlm-weight must be positive, got {self.mlm_weight} (masked LM is what the "
                                "encoder pre-trains on; the sentence objective is added to it).")
        if self.precision not in PRECISION_CHOICES:
            raise CompressError(f"unknown --precision {self.precision!r}; use one of {', '.join(PRECISION_CHOICES)}.")


@dataclass
class DownstreamConfig:
    """Where the downstream runs go and how long they train (None: the ALBERT recipe's epochs)."""

    datasets: tuple[str, ...] = ("mr",)
    out: str = "runs/pretrain-downstream"
    epochs: int | None = None
    device: str = "auto"
