"""The recipes named by cost (``--recipe fast | default | thorough``): how much transfer data every distillation stage
learns from and how long it may train, so a user picks the time they have. Importable without torch: a bad name is
refused before anything loads.

A student's stages (``distilbert``, ``tinybert``, ``albert``) and a transform's recovery (``prune``, ``lowrank``, the
quantization-aware formats) all train on the training sentences plus the transfer data: ``copies`` augmented copies
of every training sentence (TinyBERT's word replacement, :mod:`compress.students.augment`) and the user's unlabeled
text (``--transfer-text``). Copies and the user's texts are learned from the teacher's outputs only, never from a
gold label (a replaced word can flip a sentence's sentiment). Every stage stops once its dev score has not improved
for ``patience`` epochs, up to its ceiling, and keeps its best epoch; its record says how many steps it took and why it
stopped.

* ``fast``: the recipe every run had before recipes existed (but ALBERT's one copy, now ``--augment 1``): the bare
  training sentences, each method's own epochs, no early stop. For screening, and for the tests.
* ``default``: one augmented copy of every sentence, each method's own epochs as the ceiling, one epoch of patience:
  about twice ``fast``'s training steps at most.
* ``thorough``: the anchors' (TinyBERT: 20 copies, 10 epochs of intermediate-layer distillation and 3 of
  prediction-layer; TextBrewer: tens of epochs): 20 copies, candidates from a masked LM where the teacher has one,
  a ceiling of 10 epochs a stage (the method's own where it has more), three epochs of patience. A GPU's recipe.
"""

from __future__ import annotations

from dataclasses import dataclass

from compress.errors import CompressError


@dataclass(frozen=True)
class Schedule:
    """One recipe by cost.

    copies     augmented copies of every training sentence (a student's ``--augment`` wins)
    epochs     every stage trains up to at least this many epochs, a student's and a recovery's (None: each stage's
               own epochs, the method's recipe's or ``--recovery-epochs``; a run's ``--epochs`` wins)
    patience   a stage stops after this many epochs without a better dev score (None: it trains to its ceiling; a
               run's ``--patience`` wins)
    masked_lm  a copy's replacements come from the teacher's masked-LM head where its checkpoint has one (the
               paper; an hour a copy of MR with BERT-base on 2 cores), else from its word-embedding neighbours
    """

    name: str
    summary: str
    copies: int = 0
    epochs: int | None = None
    patience: int | None = None
    masked_lm: bool = False


SCHEDULES: dict[str, Schedule] = {s.name: s for s in (
    Schedule("fast", "the training sentences only, each method's own epochs (the recipe before recipes existed)"),
    Schedule("default", "one augmented copy per sentence, each method's epochs as a ceiling, patience 1",
             copies=1, patience=1),
    Schedule("thorough", "20 augmented copies per sentence, up to 10 epochs a stage, patience 3 (a GPU's recipe)",
             copies=20, epochs=10, patience=3, masked_lm=True),
)}
DEFAULT_SCHEDULE = "default"


def get_schedule(name: str) -> Schedule:
    """The recipe called ``name``; one sentence naming the others when there is none."""
    try:
        return SCHEDULES[name]
    except KeyError:
        raise CompressError(f"unknown --recipe {name!r}; use one of {', '.join(SCHEDULES)}.") from None


def check_copies(copies: int | None) -> None:
    """One sentence for a count of augmented copies (a student's ``--augment``) below zero."""
    if copies is not None and copies < 0:
        raise CompressError(f"--augment is a count of augmented copies, 0 or more, got {copies}.")
