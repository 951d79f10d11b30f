"""The recipes named by cost (``--recipe fast | default | thorough``): how much transfer data every distillation stage
learns from and how long it may train, so a user picks the time they have. Importable without torch: a bad name is
refused before anything loads.

A student's stages (``distilbert``, ``tinybert``, ``albert``) and a transform's recovery (``prune``, ``lowrank``, the
quantization-aware formats) all train on the training sentences plus the transfer data: ``copies`` augmented copies
of every training sentence (TinyBERT's word replacement, :mod:`compress.students.augment`) and the user's unlabeled
text (``--transfer-text``). Copies and the user's texts are learned from the teacher's outputs only, never from a
gold label (a replaced word can flip a sentence's sentiment). Under a recipe with ``patience`` a stage stops once its
dev score has not improved for that many epochs, up to its ceiling; every stage keeps its best evaluation, and its
record says how many steps it took and why it stopped.

* ``fast``: the recipe every run had before recipes existed (but ALBERT's one copy, now ``--augment 1``): the bare
  training sentences, each method's own epochs, no early stop. For screening, and for the tests.
* ``default``: four augmented copies of every sentence, each epoch learning from the training sentences and the next
  two copies in turn (copies 1-2, then 3-4, then 1-2 ...), each method's own epochs, trained to the end: three times
  ``fast``'s training steps. Chosen from the measured curve (``docs/tutorial.md``, section 7): the cheapest point
  within half a point of the best measured on MR's held-out sentences (a third copy an epoch, 4x, added +0.03 points
  on average over five runs of four students, none beyond its interval). A recovery learns its soft targets from the
  fine-tuned teacher (on a chain's seed: +1.1 points held out under ``fast``'s steps, -0.15, no difference, under
  these). ``albert``'s own curve flattened earlier (seed 13: one copy an epoch 93.3% held out, two 93.1%, -0.19
  paired), so its stage learns from one copy an epoch, twice ``fast``'s steps (``own_copies_per_epoch``; its stage
  costs what the teacher's fine-tuning does a step, the most of any student's). (Until round 8 it was one copy, seen
  every epoch, with one epoch of patience; :data:`KEYED_BY_NAME` keeps its runs apart.)
* ``thorough``: the anchors' (TinyBERT: 20 copies, 10 epochs of intermediate-layer distillation and 3 of
  prediction-layer; TextBrewer: tens of epochs): 20 copies, candidates from a masked LM where the teacher has one,
  a ceiling of 10 epochs a stage (the method's own where it has more), three epochs of patience. A GPU's recipe.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

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
    copies_per_epoch  each epoch learns from the training sentences and this many of the copies, the next ones in
               turn (epoch e: copies e*k+1 to e*k+k, cycling), instead of from every copy (None; a run's
               ``--copies-per-epoch`` wins)
    select     what a prediction stage keeps its weights by: ``metric`` (its best dev score on the gold labels) or
               ``divergence`` (the closest dev answers to the teacher's; :func:`compress.distill.stage.divergence_from`)
    evals_per_epoch  dev evaluations an epoch, its end included (a run's ``--eval-every`` steps wins)
    average    the decay of an exponential moving average of the weights, offered beside them at every evaluation
               (None: no average; :mod:`compress.kept_weights`)
    taught_by  whose answers a transform's recovery learns its soft targets from: ``parent`` (the model it was given,
               whose hidden states it learns from too) or ``teacher`` (the fine-tuned teacher's, where it is at hand)
    own_copies_per_epoch  (method, copies per epoch) where a method's own measured curve chose another point than
               ``copies_per_epoch`` (:meth:`for_method`)
    """

    name: str
    summary: str
    copies: int = 0
    epochs: int | None = None
    patience: int | None = None
    masked_lm: bool = False
    copies_per_epoch: int | None = None
    select: str = "metric"
    evals_per_epoch: int = 1
    average: float | None = None
    taught_by: str = "parent"
    own_copies_per_epoch: tuple[tuple[str, int], ...] = ()

    def for_method(self, method: str | None) -> Schedule:
        """The recipe as ``method``'s stages train under it: its own copies per epoch where its curve chose one."""
        own = dict(self.own_copies_per_epoch).get(method or "")
        return replace(self, copies_per_epoch=self.copies_per_epoch if own is None else own, own_copies_per_epoch=())


SCHEDULES: dict[str, Schedule] = {s.name: s for s in (
    Schedule("fast", "the training sentences only, each method's own epochs (the recipe before recipes existed)"),
    Schedule("default", "four augmented copies per sentence, two of them in turn every epoch, each method's epochs, "
             "no early stop (three times fast's steps; albert one copy an epoch, twice fast's), recoveries taught by "
             "the teacher", copies=4, copies_per_epoch=2, taught_by="teacher", own_copies_per_epoch=(("albert", 1),)),
    Schedule("thorough", "20 augmented copies per sentence, up to 10 epochs a stage, patience 3 (a GPU's recipe)",
             copies=20, epochs=10, patience=3, masked_lm=True),
)}
DEFAULT_SCHEDULE = "default"

# What each recipe did when a run's key held only the recipe's name: a run under a name that still does exactly this
# keeps the key it had; one whose recipe has changed since gets another (:func:`recipe_does`), so a run trained under
# an older meaning of a name is never reused as if it were the new one.
KEYED_BY_NAME = {
    "fast": {"copies": 0, "epochs": None, "patience": None, "masked_lm": False},
    "default": {"copies": 1, "epochs": None, "patience": 1, "masked_lm": False},
    "thorough": {"copies": 20, "epochs": 10, "patience": 3, "masked_lm": True},
}
# Since keys held only names, a stage stopped by patience cools down first (compress.training): a recipe with
# patience does something other than what its name meant then.
COOLDOWN = "lr to 0 over 0.1 of an epoch before judging"


def recipe_does(name: str, patience: int | None = None, method: str | None = None) -> dict[str, object] | None:
    """What the recipe ``name`` does, as a run's key records it: None where that is what the name did when keys held
    only names (so runs made then are still found), else every setting of it. ``patience``: a run's own, which wins.
    ``method``: what it does to that method's stages (its own copies per epoch, :meth:`Schedule.for_method`); without
    one, what it does to every method's, each one's own point included."""
    schedule = get_schedule(name)
    does = _settings(schedule.for_method(method))
    if method is None and schedule.own_copies_per_epoch:
        does["own_copies_per_epoch"] = dict(schedule.own_copies_per_epoch)
    if (patience if patience is not None else schedule.patience) is not None:
        does["stopping"] = COOLDOWN
    if name not in KEYED_BY_NAME:
        return does
    # the settings added since keys held only names, at the values that do what was done before them
    added = {k: v for k, v in _settings(Schedule(name, "")).items() if k not in KEYED_BY_NAME[name]}
    return None if does == KEYED_BY_NAME[name] | added else does


def _settings(schedule: Schedule) -> dict[str, object]:
    """A recipe's settings as a run's key records them (a method's own point resolved already: for_method)."""
    return {k: v for k, v in asdict(schedule).items() if k not in ("name", "summary", "own_copies_per_epoch")}


def epoch_examples(name: str, sentences: int, copies_per_epoch: int | None = None, method: str | None = None) -> int:
    """The examples an epoch of ``method``'s stages learns from under the recipe ``name``, with ``sentences`` training
    sentences: them and the copies each epoch takes (the method's own point on the recipe's curve; ``copies_per_epoch``:
    a run's own, which wins), as a stage's record counts them where no student's ``--augment`` or user's text adds to
    them."""
    schedule = get_schedule(name).for_method(method)
    per_epoch = copies_per_epoch if copies_per_epoch is not None else schedule.copies_per_epoch
    return sentences * (1 + min(schedule.copies, per_epoch if per_epoch is not None else schedule.copies))


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


def check_copies_per_epoch(per_epoch: int | None, copies: int | None = None) -> None:
    """One sentence for ``--copies-per-epoch`` below 1, or given where the run makes no copy to choose among
    (``copies``: the most copies any of its stages learns from; None where that is not known yet)."""
    if per_epoch is None:
        return
    if per_epoch < 1:
        raise CompressError(f"--copies-per-epoch is a count of augmented copies each epoch learns from, 1 or more, "
                            f"got {per_epoch}.")
    if copies == 0:
        raise CompressError("--copies-per-epoch chooses among augmented copies, and this run makes none; give "
                            "--recipe default or thorough (or --augment N, to a student that takes it), or leave "
                            "--copies-per-epoch out.")
    if copies is not None and per_epoch > copies:
        raise CompressError(f"--copies-per-epoch {per_epoch} is more than the {copies} augmented "
                            f"cop{'y' if copies == 1 else 'ies'} this run makes; give at most {copies}, or make "
                            "more copies (--recipe thorough, or --augment N to a student that takes it).")
