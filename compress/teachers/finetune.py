"""Fine-tuning a teacher on a task, cached by a fingerprint of everything that shapes the result.

The cache entry ``$COMPRESS_CACHE/teachers/<fingerprint>/`` holds the fine-tuned teacher in the
transformers BERT layout (safetensors + tokenizer) and ``record.json`` with its dev and test
accuracy and macro-F1. Teacher, task split and content, maximum length and hyper-parameters all
enter the fingerprint, so a repeat call is a cache hit and any change trains anew. The entry's
``checksums.json`` is verified on every use; a damaged entry is trained anew (:mod:`compress.cache`).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TypedDict

import torch
from torch import nn

from compress.bench.machine import device_name
from compress.cache import cached, write_checksums
from compress.data.batching import TokenizedTask, choose_max_length, for_device, tokenize_task
from compress.data.task import TaskData
from compress.device import resolve_device
from compress.distill.losses import hard_ce
from compress.errors import CompressError
from compress.models.checkpoints import LoadedEncoder, load_encoder, read_config, save_encoder, weights_digest
from compress.paths import atomic_dir, cache_dir
from compress.resume import Resume
from compress.teachers.registry import load_tokenizer, resolve_teacher_dir
from compress.train_config import LATER_DEFAULTS, FinetuneConfig, FinetuneConfigData, TrainConfigData
from compress.training import Batch, TrainConfig, evaluate, model_inputs, seed_everything, train_stage

RECORD = "record.json"
CACHE_VERSION = 2  # 2: entries carry checksums.json (compress.cache)


class FinetuneRecord(TypedDict, total=False):
    """record.json of a fine-tuned teacher: what was trained on what, and what it scored."""

    teacher: str
    teacher_dir: str
    dataset: str
    fingerprint: str
    split_fingerprint: str
    max_length: int
    config: FinetuneConfigData          # the FinetuneConfig, as asdict
    device: str
    label_names: list[str]
    best_epoch: int
    history: list[dict[str, str | int | float]]   # per epoch: the stage, the epoch and its dev metrics
    dev: dict[str, float]
    test: dict[str, float]              # Metrics.to_dict()
    train_seconds: float
    eval_seconds: float
    precision: str                      # what it trained in
    examples_per_second: float          # examples trained on over the seconds of training steps
    peak_memory_bytes: int              # on CUDA: the most it held allocated on the GPU


@dataclass
class FinetunedTeacher:
    """A fine-tuned teacher on disk and what it scored."""

    directory: Path
    record: FinetuneRecord
    cache_hit: bool

    def load(self) -> LoadedEncoder:
        return load_encoder(self.directory)


def hard_label_loss(model: nn.Module, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
    """Cross-entropy with the gold labels: the loss of plain fine-tuning."""
    loss = hard_ce(model(**model_inputs(batch)).logits, batch["labels"])
    return loss, {"hard_ce": loss.item()}


def finetune_fingerprint(teacher_dir: Path, task: TaskData, max_length: int, config: FinetuneConfig) -> str:
    material = {
        "version": CACHE_VERSION, "teacher": weights_digest(teacher_dir), "task": task.fingerprint,
        "content": task.content_digest(), "max_length": max_length, "train": _train_settings(config.train),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:20]


def _train_settings(train: TrainConfig) -> TrainConfigData:
    """The fine-tuning settings in the fingerprint. Settings added later are left out at the value that means what
    entries made before them did (fp32; no bar, when its epoch gain cannot matter either), so those stay valid."""
    settings: TrainConfigData = asdict(train)  # type: ignore[assignment]
    if settings["precision"] == "fp32":
        del settings["precision"]
    for name, default in LATER_DEFAULTS.items():
        if settings.get(name, default) == default:
            settings.pop(name, None)  # type: ignore[misc]
    if settings["stop_below"] is None:
        del settings["stop_below"], settings["gain_per_epoch"]
    return settings


def read_record(directory: Path) -> FinetuneRecord:
    """The record of a cache entry (its files already verified by :func:`compress.cache.cached`)."""
    return json.loads((directory / RECORD).read_text())


def finetune_teacher(
    teacher: str,
    task: TaskData,
    config: FinetuneConfig | None = None,
    *,
    device: str = "auto",
    force: bool = False,
    show_progress: bool = True,
    metric: str | None = None,
) -> FinetunedTeacher:
    """Fine-tune ``teacher`` on ``task`` (or reuse the cached result) and evaluate it on dev and test.

    ``force`` trains again and replaces the cache entry. A damaged entry is retrained after one line
    saying so (see :mod:`compress.cache`). ``metric`` (a run's ``--metric``) picks its epoch in place of its
    configuration's, as it picks every stage's of the students (another metric is another cache entry).
    """
    config = for_metric(config or FinetuneConfig(), metric)
    teacher_dir, max_length, target = _entry(teacher, task, config)
    fingerprint = target.name
    tokenizer = load_tokenizer(str(teacher_dir))

    def build(tmp: Path) -> None:
        data = tokenize_task(task, tokenizer, max_length=max_length)  # only when training: a cache hit needs none
        torch_device = resolve_device(device)
        seed_everything(config.train.seed)  # the fresh classifier is drawn from the seeded generator
        loaded = load_encoder(teacher_dir, num_labels=task.num_labels)
        if loaded.model.config.num_labels != task.num_labels:
            raise CompressError(
                f"the teacher's classifier has {loaded.model.config.num_labels} classes but {task.name} has "
                f"{task.num_labels}; use a teacher without a classifier head or with matching labels."
            )
        model = loaded.model
        tc = config.train
        batched = for_device(data, torch_device, model.config.max_positions)   # on a GPU, to a few shapes
        # The checkpoints go when the block completes: after the entry is written, not when training ends.
        with Resume({"teacher": fingerprint}, f"fine-tuning {teacher}") as resume:
            result = train_stage(
                model, hard_label_loss,
                train_batches=lambda epoch: batched.dataloader("train", batch_size=tc.batch_size, seed=tc.seed + epoch,
                                                             pin_memory=torch_device.type == "cuda"),
                dev_batches=lambda: data.eval_batches("dev", tc.eval_batch_size),
                config=tc, device=torch_device, name=f"fine-tune {teacher}", show_progress=show_progress,
                checkpoints=resume.stage(0, []),
            )
            start = time.perf_counter()
            test_batches = data.eval_batches("test", tc.eval_batch_size)
            test = evaluate(model, test_batches, torch_device, collective=True)
            record = FinetuneRecord(
                teacher=teacher, teacher_dir=str(teacher_dir), dataset=task.name, fingerprint=fingerprint,
                split_fingerprint=task.fingerprint, max_length=data.max_length, config=asdict(config),
                device=device_name(torch_device), label_names=task.label_names, best_epoch=result.best_epoch,
                history=result.history, dev=result.best_dev, test=test.to_dict(),
                train_seconds=round(result.seconds, 1), eval_seconds=round(time.perf_counter() - start, 1),
                precision=result.precision, examples_per_second=result.examples_per_second,
            )
            if result.peak_memory_bytes is not None:
                record["peak_memory_bytes"] = result.peak_memory_bytes
            save_encoder(model.cpu(), tmp, tokenizer=tokenizer, label_names=task.label_names)
            (tmp / RECORD).write_text(json.dumps(record, indent=2))

    if force:  # train again, then replace the entry (under its lock) as cached() would
        with atomic_dir(target) as tmp:
            build(tmp)
            write_checksums(tmp)
        return FinetunedTeacher(target, read_record(target), cache_hit=False)
    record, hit = cached(target, "fine-tuned teacher", build, read_record, collective=True)
    return FinetunedTeacher(target, record, cache_hit=hit)


def _entry(teacher: str, task: TaskData, config: FinetuneConfig) -> tuple[Path, int, Path]:
    """The teacher's checkpoint directory, the length its fine-tuning truncates to, and its cache entry."""
    teacher_dir = resolve_teacher_dir(teacher)
    positions = read_config(teacher_dir)[0].max_positions
    max_length = config.max_length or min(choose_max_length(task, load_tokenizer(str(teacher_dir))), positions)
    if max_length > positions:
        raise CompressError(f"--max-length {max_length} exceeds the teacher's {positions} positions.")
    return teacher_dir, max_length, cache_dir() / "teachers" / finetune_fingerprint(teacher_dir, task, max_length,
                                                                                   config)


def for_metric(config: FinetuneConfig, metric: str | None) -> FinetuneConfig:
    """``config`` with its epoch picked by ``metric`` (None: by its own)."""
    return config if metric is None else replace(config, train=replace(config.train, metric=metric))


def finetuned_here(teacher: str, task: TaskData, config: FinetuneConfig | None = None,
                   metric: str | None = None) -> bool:
    """Whether the cache holds an entry for this fine-tuning (complete: its record is written last; its checksums are
    verified when it is used)."""
    return (_entry(teacher, task, for_metric(config or FinetuneConfig(), metric))[2] / RECORD).is_file()


def tokenized_for(teacher: FinetunedTeacher, task: TaskData) -> TokenizedTask:
    """The task tokenized exactly as the teacher was trained on it."""
    return tokenize_task(task, load_tokenizer(str(teacher.directory)), max_length=teacher.record["max_length"])
