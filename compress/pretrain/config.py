"""What ``compress pretrain`` is asked to do, importable without torch (``compress pretrain --help`` shows
these defaults); :mod:`compress.pretrain.run` and :mod:`compress.pretrain.downstream` re-export them."""

from __future__ import annotations

from dataclasses import dataclass

from compress.errors import CompressError
from compress.teachers.registry import DEFAULT_TEACHER

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
    sentences_per_segment: int = 1
    max_length: int = 64
    max_pairs: int = 12000
    held_out_documents: int = 200
    epochs: int = 1
    batch_size: int = 32
    lr: float = 1e-4
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


@dataclass
class DownstreamConfig:
    """Where the downstream runs go and how long they train (None: the ALBERT recipe's epochs)."""

    datasets: tuple[str, ...] = ("mr",)
    out: str = "runs/pretrain-downstream"
    epochs: int | None = None
    device: str = "auto"
