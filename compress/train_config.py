"""The settings of a training stage and of teacher fine-tuning, importable without torch.

``compress --help`` shows these defaults; :mod:`compress.training` (the loop, which needs torch) and
:mod:`compress.teachers.finetune` re-export them, so ``from compress.training import TrainConfig`` keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

from compress.errors import CompressError
from compress.task_metrics import METRICS

# Training precisions: the forward pass under torch.autocast in this dtype (see compress.training.PRECISIONS).
PRECISION_NAMES = ("fp32", "bf16", "fp16")
# What a run may ask for: a precision, or ``auto``: on a device that computes bf16 natively, each training stage
# times a few steps of its own model in fp32 and bf16 and trains in the faster (compress.step_precision); elsewhere
# fp32. A stage's record holds the precision it trained in and, when it measured, both step times.
PRECISION_CHOICES = ("auto", *PRECISION_NAMES)
FP16_OFF_CUDA = ("--precision fp16 trains on CUDA only (it needs loss scaling, and CPUs compute fp16 slowly); use "
                 "--precision bf16 on the CPU, or --device cuda.")
# Where training runs (auto: CUDA when present, else the CPU) and where speed is measured (compress.device).
DEVICES = ("auto", "cpu", "cuda")
SPEED_DEVICES = ("cpu", "cuda")


def check_device_names(device: str, speed_device: str = "cpu") -> None:
    """One sentence for a device or speed device name compress does not know (whether the device is here is
    :mod:`compress.device`'s check)."""
    if device not in DEVICES:
        raise CompressError(f"unknown device {device!r}; use one of {', '.join(DEVICES)}.")
    if speed_device not in SPEED_DEVICES:
        raise CompressError(f"unknown --speed-device {speed_device!r}; use one of {', '.join(SPEED_DEVICES)}.")
DEFAULT_EVERY = 500   # steps between checkpoints of unfinished training, besides every epoch end
DEFAULT_SEED = 13     # every run's, and the first of a comparison's seeds
# How much dev accuracy one more epoch is assumed to add at most when a run stops below a bar (TrainConfig.stop_below),
# unless the stage itself gained more in one epoch. On MR (minilm, AMX Xeon, seeds 13-15) distilbert's dev accuracy
# rose 1.1 to 2.0 points from its first epoch to its third, 1.8 at most in one epoch; pruning's recovery 0.5.
BAR_GAIN_PER_EPOCH = 0.02


@dataclass
class TrainConfig:
    """Hyper-parameters of one training stage."""

    epochs: int = 3
    batch_size: int = 32
    lr: float = 5e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    decay: str = "linear"            # the learning rate after warm-up: linear (to 0), cosine (to 0) or constant
    max_grad_norm: float = 1.0
    seed: int = DEFAULT_SEED
    patience: int | None = None      # stop after this many epochs without a better dev score
    eval_batch_size: int = 128
    metric: str = "accuracy"         # dev metric that picks the best epoch: a task metric (a regression stage asked
                                     # for a classification one uses Pearson) or loss (minimised)
    layer_decay: float = 1.0         # layer-wise lr decay: layer l of L learns at lr * layer_decay ** (L + 1 - l)
    precision: str = "fp32"          # fp32, bf16 / fp16 autocast for the forward pass, or auto (measured per stage)
    stop_below: float | None = None  # stop once the dev metric cannot reach this in the epochs left (a search's bar)
    gain_per_epoch: float = BAR_GAIN_PER_EPOCH  # what an epoch left may add at most, unless this stage gained more
    # What chooses the weights a stage keeps: "metric" (the dev metric above, or loss), or "divergence" (how far the
    # dev answers are from the teacher's: a distillation stage's low-noise signal, compress.distill.stage)
    select: str = "metric"
    eval_every: int | None = None    # steps between dev evaluations inside an epoch (None: evals_per_epoch)
    evals_per_epoch: int = 1         # dev evaluations an epoch, its end included (where eval_every is None)
    average: float | None = None     # keep an exponential moving average of the weights with this decay (None: none)
    cooldown: float = 0.1            # a stage stopped by patience first decays its lr to 0 over this share of an epoch

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "eval_batch_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}.")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}.")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be a positive integer, got {self.patience}.")
        if not 0 < self.layer_decay <= 1:
            raise ValueError(f"layer_decay must be in (0, 1], got {self.layer_decay}.")
        if self.metric != "loss" and self.metric not in METRICS:
            raise ValueError(f"metric must be loss or one of {', '.join(METRICS)}, got {self.metric!r}.")
        if self.precision not in PRECISION_CHOICES:
            raise ValueError(f"precision must be one of {', '.join(PRECISION_CHOICES)}, got {self.precision!r}.")
        check_schedule(self.warmup_ratio, self.decay)
        if self.select not in SELECTIONS:
            raise ValueError(f"select must be one of {', '.join(SELECTIONS)}, got {self.select!r}.")
        check_evaluations(self.eval_every)
        if self.evals_per_epoch < 1:
            raise ValueError(f"evals_per_epoch must be a positive integer, got {self.evals_per_epoch}.")
        if self.average is not None and not 0 < self.average < 1:
            raise ValueError(f"average is an exponential moving average's decay, in (0, 1), got {self.average}.")
        if not 0 < self.cooldown <= 1:
            raise ValueError(f"cooldown is a share of an epoch, in (0, 1], got {self.cooldown}.")


class TrainConfigData(TypedDict, total=False):
    """A :class:`TrainConfig` as ``asdict`` (in a record, or the settings a fingerprint holds, which leave out the
    fields added later at the value that means what was done before them: precision, stop_below, gain_per_epoch)."""

    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    warmup_ratio: float
    decay: str
    max_grad_norm: float
    seed: int
    patience: int | None
    eval_batch_size: int
    metric: str
    layer_decay: float
    precision: str
    stop_below: float | None
    gain_per_epoch: float
    select: str
    eval_every: int | None
    evals_per_epoch: int
    average: float | None
    cooldown: float


DECAYS = ("linear", "cosine", "constant")
SELECTIONS = ("metric", "divergence")
# What a fingerprint leaves out at these values: fields added later, at the value that means what was done before them
# (compress.teachers.finetune keys a fine-tuned teacher by its TrainConfig).
LATER_DEFAULTS = {"select": "metric", "eval_every": None, "evals_per_epoch": 1, "average": None, "cooldown": 0.1}


def check_evaluations(eval_every: int | None) -> None:
    """One sentence for an evaluation interval that is not a positive number of steps."""
    if eval_every is not None and (isinstance(eval_every, bool) or not isinstance(eval_every, int) or eval_every < 1):
        raise CompressError(f"--eval-every is a number of training steps between dev evaluations, 1 or more, got "
                            f"{eval_every}.")


def check_schedule(warmup: float | None, decay: str | None) -> None:
    """One sentence for a warm-up share outside [0, 1) or a decay compress does not know."""
    if warmup is not None and not 0 <= warmup < 1:
        raise CompressError(f"--warmup is the share of a stage's steps that warm up, in [0, 1), got {warmup}.")
    if decay is not None and decay not in DECAYS:
        raise CompressError(f"unknown --decay {decay!r}; use one of {', '.join(DECAYS)}.")


@dataclass
class FinetuneConfig:
    """Teacher fine-tuning hyper-parameters (:func:`compress.teachers.finetune.finetune_teacher`).

    minilm on MR with these defaults: dev 84.5%, test 82.9%. Without layer-wise lr decay
    (``layer_decay=1``) the same run reached dev 84.1%, test 81.8%: the decay keeps the lower,
    general layers close to their pre-trained weights on a task of 8,500 sentences.
    """

    train: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=3, lr=1e-4, batch_size=32, layer_decay=0.8))
    max_length: int | None = None     # None: the 99th percentile of train lengths, capped


class FinetuneConfigData(TypedDict):
    """A :class:`FinetuneConfig` as ``asdict``: a fine-tuned teacher's record.json ``config``, a run's
    config.json ``run.teacher_finetune``."""

    train: TrainConfigData
    max_length: int | None


class StageRecord(TypedDict, total=False):
    """What a run records of one training stage it ran (metrics.json's ``stages``)."""

    stage: str
    best_epoch: int
    best_dev: dict[str, float]
    epochs: int                   # the epochs it trained
    max_epochs: int               # its ceiling (the method's epochs, raised by the run's recipe)
    steps: int                    # the optimizer steps it took
    examples_per_epoch: int       # the training sentences and the transfer data after them
    seconds: float
    stopped_early: bool
    stop_reason: str              # why it stopped early: "patience", or "bar" (it could not reach stop_below)
    cooldown_steps: int           # stopped by patience: the steps its learning rate took to decay to zero first
    selected_on: str              # what chose the kept weights: the dev metric's name, "loss", or "divergence"
    kept_step: int                # the optimizer step the kept weights were taken at
    kept_average: bool            # the kept weights are the running average's (TrainConfig.average)
    soft_targets: str             # "teacher": a recovery learned its soft targets from the fine-tuned teacher
    precision: str                # what it trained in (auto resolved: see compress.step_precision)
    step_ms: dict[str, float]     # under auto, the median training step in each precision it timed
    warnings: list[str]
    device: str                   # where it trained: the GPU's name or the CPU's model
    examples_per_second: float    # examples trained on over the seconds of its training steps
    peak_memory_bytes: int        # on CUDA: the most it held allocated on the GPU
    cut: dict[str, list[Any] | None]   # a student cut while it distils: what of the teacher it keeps from the next
                                  # stage on (layers, channels, heads and neurons; compress.students.cut.cut_record)


@dataclass(frozen=True)
class TrainSettings:
    """What every stage of one run trains with, whatever its recipe: a run's batch size, seed, early stopping
    and precision (a student's distillation, a transform's recovery)."""

    batch_size: int = 32
    seed: int = DEFAULT_SEED
    patience: int | None = None
    precision: str = "fp32"
    stop_below: float | None = None   # a search's bar on dev accuracy (TrainConfig.stop_below)
    metric: str = "accuracy"          # the dev metric that picks each stage's best epoch (TrainConfig.metric)
    min_epochs: int | None = None     # every stage's epochs raised to at least this (the run's recipe's ceiling)
    copies_per_epoch: int | None = None   # augmented copies each epoch learns from, in turn (None: every copy)
    select: str = "metric"            # what a prediction stage keeps its weights by (TrainConfig.select)
    eval_every: int | None = None     # steps between dev evaluations inside an epoch (TrainConfig.eval_every)
    evals_per_epoch: int = 1          # dev evaluations an epoch where eval_every is None (TrainConfig.evals_per_epoch)
    average: float | None = None      # the decay of the weights' running average, or None (TrainConfig.average)
    taught_by: str = "parent"         # a recovery's soft targets: the model it was given's, or the teacher's
