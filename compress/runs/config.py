"""What one `compress run` is asked to do, what it gives back, and where it writes.

Importable without torch: a :class:`RunConfig` refuses what its values alone show to be wrong before torch, the
data or a teacher loads (the CLI makes one before it imports the run's modules).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compress.data.transfer_text import check_transfer_text, transfer_digest
from compress.distill.schedule import DEFAULT_SCHEDULE, check_copies_per_epoch, get_schedule, recipe_does
from compress.errors import CompressError
from compress.ownership import foreign, mark_run, owned
from compress.paths import atomic_dir, locked, notice
from compress.task_metrics import METRICS, resolve_metric
from compress.teachers.registry import DEFAULT_TEACHER
from compress.train_config import (
    DEFAULT_EVERY,
    DEFAULT_SEED,
    FP16_OFF_CUDA,
    LATER_DEFAULTS,
    PRECISION_CHOICES,
    FinetuneConfig,
    check_device_names,
    check_evaluations,
    check_schedule,
)

if TYPE_CHECKING:
    from compress.data.task import TaskData
    from compress.reports.records import RunRecord, RunSettings


@dataclass
class RunConfig:
    """One `compress run`: method (or pipeline), teacher, data and training settings.

    ``method`` is one method or a pipeline (``distilbert+int8``, ``albert[sharing=attention]+int8``);
    ``then`` appends steps to it. ``options`` are the methods' options given by flag or --set: each goes
    to the step whose method takes it. ``epochs``, ``lr`` and ``layer_map`` override a student
    method's recipe when set. ``target`` is what a pipeline that starts with a transform transforms
    (``teacher`` or an earlier run directory); ``threads`` is what speed is measured with.
    """

    method: str
    teacher: str = DEFAULT_TEACHER
    dataset: str = "mr"
    text_column: str | None = None
    text_pair_column: str | None = None
    label_column: str | None = None
    task: str = "auto"                # a file's labels: auto (fractions: a regression), classification, regression
    dedupe: bool = False              # drop dev/test rows whose text occurs in train
    options: dict[str, object] = field(default_factory=dict)   # by name: a flag's value, or --set's text
    epochs: int | None = None
    lr: float | None = None
    layer_map: str | None = None      # overrides the recipe's: uniform, last, every_other or "2,4,6"
    patience: int | None = None       # early stopping: epochs without a better dev score
    stop_below: float | None = None   # early stopping: stop a stage once its dev accuracy cannot reach this
    batch_size: int = 32
    seed: int = DEFAULT_SEED
    device: str = "auto"
    teacher_finetune: FinetuneConfig = field(default_factory=FinetuneConfig)
    target: str = "teacher"
    then: list[str] = field(default_factory=list)
    threads: int | None = None
    out: str | None = None
    overwrite: bool = False
    precision: str = "auto"           # training precision: auto (resolved here), fp32, bf16, fp16 (CUDA only)
    checkpoint_every: int = DEFAULT_EVERY  # steps between checkpoints of unfinished training (0: epoch ends)
    speed_device: str = "cpu"         # where the models are timed: the CPU, or a GPU (cuda)
    hold_out: int = 0                 # training examples held out for a search to select on (TaskData.hold_out)
    metric: str | None = None         # the dev metric that picks each stage's epoch (None: the task's default)
    recipe: str = DEFAULT_SCHEDULE    # by cost: fast, default or thorough (compress.distill.schedule)
    transfer_text: str | None = None  # a file of unlabeled in-domain text every distillation stage learns from
    transfer_sha256: str | None = None   # its content's digest (set here): what the run's result depends on
    warmup: float | None = None       # every stage's warm-up share (None: each stage's own)
    decay: str | None = None          # every stage's learning-rate decay: linear, cosine, constant (None: its own)
    copies_per_epoch: int | None = None   # augmented copies each epoch learns from, in turn (None: the recipe's)
    eval_every: int | None = None     # training steps between dev evaluations inside an epoch (None: the recipe's)
    recipe_does: dict[str, object] | None = None   # what the recipe does, where its name no longer says (set here)

    def __post_init__(self) -> None:
        """Refuse values that cannot be right, before any work (never silently replace them)."""
        self.dedupe = bool(self.dedupe)  # a run recorded before --dedupe existed (None) kept every row
        for flag, value in (("--epochs", self.epochs), ("--batch-size", self.batch_size),
                            ("--patience", self.patience), ("--threads", self.threads)):
            if value is not None and value < 1:
                raise CompressError(f"{flag} must be a positive integer, got {value}.")
        check_evaluations(self.eval_every)
        if self.stop_below is not None and not 0 < self.stop_below <= 1:
            raise CompressError(f"--stop-below is a dev score in (0, 1], got {self.stop_below}.")
        if self.lr is not None and not self.lr > 0:
            raise CompressError(f"--lr must be positive, got {self.lr}.")
        if self.checkpoint_every < 0:
            raise CompressError(f"--checkpoint-every must be 0 (epoch ends only) or more, got {self.checkpoint_every}.")
        if self.metric is not None and self.metric not in METRICS:
            raise CompressError(f"unknown --metric {self.metric!r}; use one of {', '.join(METRICS)}.")
        if self.hold_out < 0:
            raise CompressError(f"the examples held out to select on must be 0 or more, got {self.hold_out}.")
        if self.precision not in PRECISION_CHOICES:
            raise CompressError(f"unknown --precision {self.precision!r}; use one of {', '.join(PRECISION_CHOICES)}.")
        check_device_names(self.device, self.speed_device)
        get_schedule(self.recipe)
        check_schedule(self.warmup, self.decay)
        check_copies_per_epoch(self.copies_per_epoch)
        if self.transfer_text is not None:
            self.transfer_text = str(check_transfer_text(self.transfer_text))
            self.transfer_sha256 = transfer_digest(self.transfer_text)
        self.recipe_does = recipe_does(self.recipe, self.patience, self.method)
        if self.precision == "fp16" and self.device == "cpu":
            raise CompressError(FP16_OFF_CUDA)
        # What needs torch (is a GPU here? does this CPU compute bf16?) comes last.
        from compress.device import check_speed_device
        from compress.training import run_precision

        check_speed_device(self.speed_device)
        # auto becomes fp32 where this device would emulate bf16, and stays auto (each stage times both and
        # trains in the faster, its record says which) where it computes bf16; a comparison reuses a run only
        # when it was asked for the same.
        self.precision = run_precision(self.precision, self.device)


# Settings that change where a run is written, how it is timed or checkpointed, not what it trains. A bar
# (``stop_below``) changes a run only where it stopped it, which its record says (see stopped_by_bar).
NOT_RESULT = ("out", "overwrite", "threads", "checkpoint_every", "stop_below", "transfer_text")


def result_settings(run: RunSettings) -> RunSettings:
    """The settings of a run (``asdict(RunConfig)`` or a config.json's ``run``) that decide its result; a
    run recorded before ``precision`` existed trained in fp32, one before ``dedupe`` kept every row, one before
    ``speed_device`` was timed on the CPU (a quantization's backend is chosen among those that run where it is timed,
    so the device is part of its result), one before ``hold_out`` trained on all of train, one before ``metric``
    picked its epochs on the task's default metric (as one without it does); a teacher fine-tuned
    without a bar is one fine-tuned before bars existed."""
    settings: RunSettings = {"precision": "fp32", "dedupe": False, "speed_device": "cpu", "hold_out": 0} | \
        {k: v for k, v in run.items() if k not in NOT_RESULT}
    does = settings.get("recipe_does")
    if isinstance(does, dict) and settings.get("copies_per_epoch") == does.get("copies_per_epoch"):
        settings.pop("copies_per_epoch")   # given as the recipe it ran under has it: the same training, the same key
    # unset: as every run before they existed
    for name in ("metric", "transfer_sha256", "warmup", "decay", "copies_per_epoch", "eval_every", "recipe_does"):
        if settings.get(name) is None:
            settings.pop(name, None)
    if settings.get("task", "auto") == "auto":   # labels read as every run before --task read them
        settings.pop("task", None)
    train = (settings.get("teacher_finetune") or {}).get("train")
    if isinstance(train, dict):   # the teacher's fine-tuning: its settings added later, left out at their old values
        train = {k: v for k, v in train.items() if not (k in LATER_DEFAULTS and v == LATER_DEFAULTS[k])}
        if train.get("stop_below") is None:
            train = {k: v for k, v in train.items() if k not in ("stop_below", "gain_per_epoch")}
        settings["teacher_finetune"] = {**settings["teacher_finetune"], "train": train}
    return settings


def check_copies_chosen(recipe: str, copies_per_epoch: int | None, steps: Iterable[tuple[Any, Any]]) -> None:
    """Refuse ``--copies-per-epoch`` in one sentence, before any work, where the steps of a run (or the runs of a
    comparison) make no augmented copy to choose among or fewer than it asks for each epoch. ``steps``: each one's
    (method, options); a student method's ``--augment`` says its copies (its ``copies``), the recipe every other one's.
    A recipe's own copies per epoch is never refused: a stage with that many copies or fewer (``--augment 0`` or 1
    under ``default``) learns from all of them every epoch."""
    if copies_per_epoch is None:
        return
    schedule = get_schedule(recipe)

    def copies(method: Any, options: Any) -> int:
        own = method.copies(options) if getattr(method, "copies", None) is not None else None
        return schedule.copies if own is None else own

    check_copies_per_epoch(copies_per_epoch, max((copies(m, o) for m, o in steps), default=schedule.copies))


@dataclass
class RunResult:
    directory: Path
    record: RunRecord | None           # its metrics.json (None on the ranks of a data-parallel run but rank 0)
    chained: RunResult | None = None   # the next step's run, in a pipeline

    def steps(self) -> list[RunResult]:
        """This run and every later step of its pipeline, in order."""
        return [self, *(self.chained.steps() if self.chained else [])]


def out_dir(config: RunConfig, dataset_name: str) -> Path:
    """The run directory: ``--out`` or runs/METHOD-DATASET-TIME (checked by :func:`claimed`)."""
    if config.out:
        return Path(config.out)
    return Path("runs") / f"{config.method}-{Path(dataset_name).stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_out(out: Path, overwrite: bool) -> None:
    """One clear line, before any work, when a run cannot be written to ``out``.

    An existing non-empty directory is replaced only with ``overwrite``, and only when its content says it
    is a run compress wrote and nobody added to (:mod:`compress.ownership`): never an ordinary directory,
    a model directory, the current directory or one of its parents.
    """
    if out.exists() and not out.is_dir():
        raise CompressError(f"--out {out} is a file, not a directory; choose another --out.")
    ancestor = next(p for p in (out.absolute(), *out.absolute().parents) if p.exists())
    if ancestor != out.absolute() and not ancestor.is_dir():
        raise CompressError(f"--out {out} cannot be made: {ancestor} is a file; choose another --out.")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise CompressError(f"--out {out} cannot be written: no permission to write in {ancestor}.")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if not overwrite:
        raise CompressError(f"{out} already exists and is not empty; choose another --out or pass --overwrite.")
    resolved, here = out.resolve(), Path.cwd().resolve()
    if resolved == here or resolved in here.parents:
        raise CompressError(f"--overwrite will not replace {out}: it is the current directory or one of its "
                            "parents; choose another --out.")
    if (reason := foreign(out, "run")) is not None:
        raise CompressError(f"--overwrite replaces only a compress run directory (one compress wrote, nothing "
                            f"added), and {resolved} {reason}; choose another --out.")


@contextmanager
def claimed(out: Path, overwrite: bool) -> Iterator[Path]:
    """Hold ``out``'s lock from the first check to the final rename.

    A second process writing the same directory fails at once with one line instead of racing this
    one; temporary directories left beside ``out`` by a killed run are removed.
    """
    from compress.distributed import world

    if not world().is_main:  # rank 0 writes the run; the other ranks of a data-parallel run only train
        yield out
        return
    check_out(out, overwrite)  # a bad path fails with its own reason, not the lock's
    with locked(out, wait=False, what=f"the run {out}"):
        check_out(out, overwrite)  # again: another process may have written it meanwhile
        if overwrite and owned(out, "run"):
            notice(f"the run in {out.resolve()} will be replaced when this one completes.")
        yield out


@contextmanager
def run_directory(out: Path) -> Iterator[Path]:
    """Where a run writes its files: a temporary sibling of ``out`` that replaces it when the run completes
    (:func:`compress.paths.atomic_dir`); on the other ranks of a data-parallel run, a directory thrown
    away after (rank 0 writes the run)."""
    from compress.distributed import world

    if world().is_main:
        with atomic_dir(out) as tmp:
            yield tmp
            mark_run(tmp)  # last: the marker lists every entry the run wrote and its metrics' digest
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield Path(tmp)


def run_task(config: RunConfig) -> TaskData:
    """The task a run reads: its dataset with its column choices, less the training examples it holds out.

    Raises:
        CompressError: ``--metric`` does not score the task (one sentence).
    """
    from compress.data.load import dataset_args, load_task

    task = load_task(**dataset_args(config)).hold_out(config.hold_out)
    resolve_metric(config.metric, regression=task.regression, classes=task.num_labels)
    return task


def check_task(config: RunConfig) -> None:
    """Refuse a dataset :func:`run_task` could not load, without fetching it (a local file is read)."""
    from compress.data.load import check_dataset, dataset_args

    check_dataset(**dataset_args(config))
