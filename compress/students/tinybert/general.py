"""General distillation (TinyBERT's first phase): a student learns the pre-trained teacher's
embeddings, hidden states and attention on raw text, before it sees the task.

The teacher is the *pre-trained* one (not fine-tuned); the corpus is split into short passages
of consecutive sentences. The result is cached by a fingerprint of teacher weights, student
shape and settings, so every task run that asks for it reuses it; its checksums are verified on
every use, and a damaged entry is trained again (:mod:`compress.cache`).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import datasets

from compress.cache import cached
from compress.data.batching import collator_for, make_dataloader, tokenize_dataset
from compress.data.corpus import load_corpus
from compress.device import resolve_device
from compress.distill.layer_maps import LayerMap
from compress.distill.objective import DistillationObjective
from compress.distill.recipe import Stage
from compress.distill.recipes import tinybert_recipe
from compress.models.checkpoints import load_encoder, save_encoder, weights_digest
from compress.models.config import EncoderConfig
from compress.models.encoder import Encoder
from compress.paths import cache_dir
from compress.resume import Resume
from compress.teachers.registry import load_tokenizer, resolve_teacher_dir
from compress.training import TrainConfig, seed_everything, train_stage

# General distillation distils what TinyBERT's intermediate stage does: embeddings, hidden states, attention.
GENERAL_TERMS = tuple(tinybert_recipe().stages[0].terms)
RECORD = "record.json"
_CACHE_VERSION = 2  # enters the key; 2: entries carry checksums.json (compress.cache)


@dataclass
class GeneralDistillConfig:
    """Raw-text distillation settings (sized for a CPU; the paper used far more text)."""

    corpus: str = "bbc-news"
    sentences_per_passage: int = 2
    max_passages: int = 20000
    held_out: int = 500
    max_length: int = 64
    epochs: int = 1
    lr: float = 1e-4
    batch_size: int = 32
    seed: int = 13


def _passages(config: GeneralDistillConfig) -> list[str]:
    k = config.sentences_per_passage
    passages = [" ".join(d.sentences[i : i + k]) for d in load_corpus(config.corpus)
                for i in range(0, len(d.sentences), k)]
    random.Random(config.seed).shuffle(passages)
    return passages[: config.max_passages + config.held_out]


def general_distillation(teacher: str, student_config: EncoderConfig, config: GeneralDistillConfig | None = None,
                         *, device: str = "auto", show_progress: bool = True) -> Path:
    """The checkpoint directory of a general-distilled student of ``student_config`` (trained or cached).

    Its classifier is untrained and may have another number of labels than ``student_config``'s
    (the cache entry is shared across tasks); a task run replaces it."""
    config = config or GeneralDistillConfig()
    teacher_dir = resolve_teacher_dir(teacher)
    # The classifier is neither trained nor used here, so tasks with any number of labels share the entry.
    body = {k: v for k, v in student_config.to_dict().items() if k != "num_labels"}
    key = hashlib.sha256(json.dumps({"version": _CACHE_VERSION, "teacher": weights_digest(teacher_dir),
                                     "student": body, "config": asdict(config)},
                                    sort_keys=True).encode()).hexdigest()[:20]
    target = cache_dir() / "general" / key

    def build(tmp: Path) -> None:
        with Resume({"general": key}, "general distillation") as resume:
            _distil(teacher, teacher_dir, student_config, config, tmp, device, show_progress, resume)

    return cached(target, "general-distilled student", build, _student_of, collective=True)[0]


def _student_of(entry: Path) -> Path:
    """The student checkpoint of an (intact) cache entry."""
    if not (entry / RECORD).is_file() or not (entry / "student").is_dir():
        raise ValueError(f"it lacks {RECORD} or student/")
    return entry / "student"


def _distil(teacher: str, teacher_dir: Path, student_config: EncoderConfig, config: GeneralDistillConfig,
            out: Path, device: str, show_progress: bool, resume: Resume) -> None:
    """Train the general-distilled student and write it to ``out/student`` with ``out/record.json``."""
    torch_device = resolve_device(device)
    tokenizer = load_tokenizer(str(teacher_dir))
    texts = _passages(config)
    rows = datasets.Dataset.from_dict({"text": texts, "label": [0] * len(texts)})
    tokenized = tokenize_dataset(rows, tokenizer, min(config.max_length, student_config.max_positions))
    held_out, train = tokenized.select(range(config.held_out)), tokenized.select(range(config.held_out, len(texts)))
    collator = collator_for(tokenizer)

    pretrained = load_encoder(teacher_dir).model.to(torch_device)
    seed_everything(config.seed)
    student = Encoder(student_config).to(torch_device)
    stage = Stage("general", list(GENERAL_TERMS), epochs=config.epochs, lr=config.lr, select_on="loss")
    objective = DistillationObjective(stage, pretrained, student, LayerMap("uniform")).to(torch_device)

    def held_out_loss(model: Encoder) -> dict[str, float]:
        return objective.mean_loss(model, make_dataloader(held_out, collator, batch_size=128), torch_device)

    result = train_stage(
        student, objective,
        lambda epoch: make_dataloader(train, collator, batch_size=config.batch_size, shuffle=True,
                                      seed=config.seed + epoch),
        lambda: [], TrainConfig(epochs=config.epochs, lr=config.lr, batch_size=config.batch_size,
                                seed=config.seed, metric="loss"),
        device=torch_device, name="general distillation", extra_parameters=list(objective.projections.parameters()),
        evaluate_fn=held_out_loss, show_progress=show_progress,
        checkpoints=resume.stage(0, []),
    )
    record = {"teacher": teacher, "corpus": config.corpus, "passages": len(train), "config": asdict(config),
              "held_out_loss": result.best_dev, "history": [{"epoch": h["epoch"], "loss": h["loss"]}
                                                            for h in result.history],
              "seconds": round(result.seconds, 1)}
    save_encoder(student.cpu(), out / "student")
    (out / RECORD).write_text(json.dumps(record, indent=2))
