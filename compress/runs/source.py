"""What a transform takes: the fine-tuned teacher or the fp32 student of an earlier run, with its data."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import torch

from compress.cache import verify
from compress.data.batching import TokenizedTask, tokenize_task
from compress.data.task import TaskData
from compress.distill.teacher_logits import teacher_logits
from compress.errors import CompressError
from compress.models.checkpoints import load_encoder
from compress.models.encoder import Encoder
from compress.predictions import Predictions, load_predictions
from compress.reports.records import ChainStep, ModelRecord, RunRecord, RunSettings, SavedConfig, read_run_record
from compress.reports.run_record import teacher_record
from compress.runs.config import RunConfig, claimed, out_dir, run_task
from compress.teachers.finetune import FinetunedTeacher, finetune_teacher, read_record, tokenized_for
from compress.teachers.registry import load_tokenizer

TEACHER_OUTPUTS = ("test", "dev")   # the splits whose teacher predictions a run keeps
# What a transform takes from the run it transforms: its teacher and its data, as that run read them (a run made
# before hold_out or task existed held nothing out and read its labels as auto does).
SETTINGS = ("teacher", "dataset", "text_column", "text_pair_column", "label_column", "task", "dedupe", "hold_out")


@dataclass
class Source:
    """The fp32 model a transform takes, the data it was trained on, and what it is measured against."""

    kind: str                      # "teacher" or "run"
    model: Encoder
    directory: Path                # its weights and tokenizer
    task: TaskData
    data: TokenizedTask
    teacher_name: str
    teacher: ModelRecord           # the teacher's record (retention is measured against it)
    entry: ModelRecord             # the source's own record
    parent: str | None             # the run directory quantized, if any
    settings: RunSettings          # teacher, dataset and columns it was made with (SETTINGS)
    chain: list[ChainStep]         # the steps that made it ([] for the teacher)
    # the fine-tuned teacher's predictions on "test" and "dev", what the run's retention intervals pair with (empty:
    # a run made before runs kept them)
    teacher_outputs: dict[str, Predictions] = field(default_factory=dict)
    # the fine-tuned teacher on disk, where it is at hand (a run made before runs named it, or whose teacher's cache
    # entry is gone, has none): what a recovery's soft targets come from (:func:`teacher_answers`)
    finetuned: FinetunedTeacher | None = None

    @property
    def name(self) -> str:
        """What it is called in plots: the teacher's name, or the run directory's."""
        return self.teacher_name if self.kind == "teacher" else Path(self.parent or "").name


def finetuned_source(config: RunConfig, task: TaskData, finetuned: FinetunedTeacher, model: Encoder,
                     data: TokenizedTask, outputs: dict[str, Predictions] | None = None) -> Source:
    """The fine-tuned teacher as a source: what a transform of it, or a student trained from it, is measured
    against (``data``: the task as the teacher tokenizes it, or a student's augmented copy of that)."""
    entry = teacher_record(model, finetuned.record, data.max_length, finetuned.directory)
    settings: RunSettings = {k: getattr(config, k) for k in SETTINGS}  # type: ignore[assignment]
    return Source("teacher", model, finetuned.directory, task, data, config.teacher, entry, entry, None, settings, [],
                  outputs if outputs is not None else teacher_outputs(finetuned, model, data), finetuned)


def teacher_outputs(finetuned: FinetunedTeacher, model: Encoder, data: TokenizedTask) -> dict[str, Predictions]:
    """The fine-tuned teacher's predictions on test and dev (:data:`TEACHER_OUTPUTS`), computed once and cached; under
    a launcher every rank calls it (the cache's main process computes them while the others wait)."""
    return {split: Predictions.of(teacher_logits(model, data, split, finetuned.record["fingerprint"],
                                                 next(model.parameters()).device, show_progress=False),
                                  data.splits[split]["labels"]) for split in TEACHER_OUTPUTS}


def teacher_source(config: RunConfig, task: TaskData, show_progress: bool) -> Source:
    finetuned = finetune_teacher(config.teacher, task, config.teacher_finetune, device=config.device,
                                 show_progress=show_progress, metric=config.metric)
    return finetuned_source(config, task, finetuned, finetuned.load().model, tokenized_for(finetuned, task))


def parent_run(run_dir: Path) -> tuple[SavedConfig, RunRecord]:
    """The config.json and metrics.json of a run directory whose fp32 student is to be transformed (any run
    that wrote one: distillation, pruning)."""
    record = read_run_record(run_dir)
    if record.quantized or not (run_dir / "student").is_dir():
        raise CompressError(f"{run_dir} holds no fp32 student to transform; give a run that wrote one, or 'teacher'.")
    return json.loads((run_dir / "config.json").read_text()), record


def run_source(run_dir: Path) -> Source:
    """The fp32 student of a run, with the data exactly as it was trained on."""
    parent_config, parent = parent_run(run_dir)
    run = parent_config["run"]
    # a setting added since it ran: the default it ran at
    settings: RunSettings = {k: run[k] for k in SETTINGS if k in run}  # type: ignore[assignment]
    task = run_task(RunConfig(method=run["method"], **settings))
    if task.fingerprint != parent.dataset.fingerprint:
        raise CompressError(f"the data of {run_dir} has changed since it ran (split fingerprint differs).")
    student_dir = run_dir / "student"
    data = tokenize_task(task, load_tokenizer(str(student_dir)), max_length=parent_config["max_length"])
    return Source("run", load_encoder(student_dir).model, student_dir, task, data, run["teacher"],
                  parent.teacher, parent.student, str(run_dir), settings, parent.chain,
                  kept_teacher_outputs(run_dir, parent), recorded_teacher(parent_config))


def recorded_teacher(config: SavedConfig) -> FinetunedTeacher | None:
    """The fine-tuned teacher a run's config.json names (``teacher_dir``), where its cache entry is still whole."""
    directory = config.get("teacher_dir")
    if not directory or verify(Path(directory)) is not None:
        return None
    return FinetunedTeacher(Path(directory), read_record(Path(directory)), cache_hit=True)


def teacher_answers(source: Source, data: TokenizedTask, device: torch.device) -> Callable[[str], torch.Tensor] | None:
    """The fine-tuned teacher's logits on a split of ``data`` (computed once on ``device`` and cached: the soft
    targets a recovery learns from), or None where the teacher is not at hand or ``data`` is not tokenized as it was
    (a pruned vocabulary numbers the tokens otherwise): the recovery learns from its parent then."""
    finetuned = source.finetuned
    if finetuned is None or data.cache_key != tokenized_for(finetuned, source.task).cache_key:
        return None

    @cache
    def teacher() -> Encoder:   # loaded once, on the first split asked for
        return (source.model if source.kind == "teacher" else finetuned.load().model).to(device)

    def answers(split: str) -> torch.Tensor:
        return teacher_logits(teacher(), data, split, finetuned.record["fingerprint"], device, show_progress=False)

    return answers


def kept_teacher_outputs(run_dir: Path, record: RunRecord) -> dict[str, Predictions]:
    """The teacher's predictions a run kept beside its own (none where it kept none: an older run)."""
    kept = record.teacher_predictions or {}
    return {split: load_predictions(run_dir, kept[split], f"teacher_{split}") for split in TEACHER_OUTPUTS
            if split in kept}


@contextmanager
def claimed_source(config: RunConfig, show_progress: bool) -> Iterator[tuple[RunConfig, Source, Path]]:
    """The source of a transform run, its config (with the source's own teacher and data settings when it
    is a run) and its claimed run directory. The teacher is fine-tuned only once the directory is
    claimed, so a taken --out fails first."""
    source = None
    if config.target == "teacher":
        task = run_task(config)
        out = out_dir(config, task.name)
    else:
        source = run_source(Path(config.target))
        # The student's own data and teacher, not the command line's defaults, are what this run used.
        config = replace(config, **source.settings)
        out = out_dir(config, source.task.name)
    with claimed(out, config.overwrite):
        yield config, source or teacher_source(config, task, show_progress), out
