"""A finished run's model, loaded to answer: what ``compress.load(RUN_DIR)`` and ``compress predict`` give.

A run directory holds its model in one of two places: ``student/`` (an fp32 encoder checkpoint with its tokenizer,
run by PyTorch) or ``model/`` (a quantized artefact, run by the backend it was measured on: PyTorch, ONNX Runtime or
OpenVINO, with the tokenizer it was fed). Its ``metrics.json`` names the task's label names and, since runs recorded
them, the SHA-256 of every model file, checked before the model is loaded; its ``config.json`` the maximum length
the run tokenized to. Texts are tokenized as the run's own evaluation tokenized them (truncated to that length,
padded per batch), shortest first, so a batch pads little, and answered in the order given. A model on ONNX Runtime
or OpenVINO answers with its runtime, numpy and the ``tokenizers`` library alone (:mod:`compress.inference.tokenize`
says when a tokenizer needs transformers after all); torch is imported for a model PyTorch runs.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from compress.data.padding import length_sorted_batches, pad_features
from compress.errors import CompressError
from compress.inference.tokenize import TextTokenizer, load_tokenizer
from compress.ownership import read_marker
from compress.quantize.manifest import RUNTIME_BACKENDS, read_manifest, runtime_predictor
from compress.reports.records import RunRecord, SavedConfig, read_run_record

STUDENT_DIR, ARTEFACT_DIR = "student", "model"
PROGRESS_MIN_TEXTS = 1000    # fewer texts than this are answered without a progress bar


class AnswerData(TypedDict, total=False):
    """:meth:`Answer.to_dict`, what `compress predict --json` prints: a class's ``label``, ``score`` and
    ``probabilities``, or a regression's ``value``; ``text_pair`` for a pair."""

    text: str
    text_pair: str
    label: str
    score: float
    probabilities: dict[str, float] | None
    value: float


@dataclass(frozen=True)
class Answer:
    """What the model answered for one text (or text pair)."""

    text: str
    text_pair: str | None
    label: str | None                          # the class answered; None for a regression
    score: float                               # that class's probability; a regression's value
    probabilities: dict[str, float] | None     # every class's; None for a regression

    def to_dict(self) -> AnswerData:
        data: AnswerData = {"text": self.text}
        if self.text_pair is not None:
            data["text_pair"] = self.text_pair
        if self.label is None:
            return data | {"value": self.score}
        return data | {"label": self.label, "score": self.score, "probabilities": self.probabilities}


def model_dir_of(run_dir: Path) -> Path:
    """Where a run keeps its model: ``model/`` (a quantized artefact) or ``student/`` (an fp32 checkpoint)."""
    for name in (ARTEFACT_DIR, STUDENT_DIR):
        if (run_dir / name).is_dir():
            return run_dir / name
    raise CompressError(f"{run_dir} holds no model (neither {ARTEFACT_DIR}/ nor {STUDENT_DIR}/); is it a finished run "
                        "of compress?")


def model_files(model_dir: Path) -> dict[str, str]:
    """The SHA-256 of every file of a model directory, by its name (what a run records and a load checks)."""
    digests = {}
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        with open(path, "rb") as f:
            digests[path.relative_to(model_dir).as_posix()] = hashlib.file_digest(f, "sha256").hexdigest()
    return digests


def check_model_files(run_dir: Path, record: RunRecord, model_dir: Path) -> None:
    """Refuse a model whose files are not those the run wrote (a run recorded before runs kept their digests passes:
    there is nothing to check it against)."""
    if record.model_files is None:
        return
    found = model_files(model_dir)
    for name, digest in record.model_files.items():
        if found.get(name) != digest:
            what = "is missing" if name not in found else "fails its checksum"
            raise CompressError(f"{model_dir / name} {what} (metrics.json records another file); the run is "
                                "damaged: make it again.")


def finished_run(run_dir: Path | str) -> tuple[Path, RunRecord, SavedConfig]:
    """A directory that is a finished run of compress, with its record and config; one sentence otherwise."""
    run_dir = Path(run_dir).expanduser()
    if not run_dir.is_dir():
        raise CompressError(f"{run_dir} is not a directory; give a run directory compress wrote.")
    marker = read_marker(run_dir)
    if marker is None or marker.kind != "run":
        raise CompressError(f"{run_dir} is not a finished run of compress (it holds no run marker of ours); give a "
                            "run directory that `compress run`, `compare` or `search` wrote.")
    record = read_run_record(run_dir)
    try:
        config: SavedConfig = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        raise CompressError(f"{run_dir} has no readable config.json; make the run again.") from None
    return run_dir, record, config


def takes_pairs(record: RunRecord, config: SavedConfig) -> bool:
    """Whether the run's task is one of text pairs (a run recorded before runs said so: whether it named a pair
    column)."""
    if record.dataset.pairs is not None:
        return bool(record.dataset.pairs)
    return bool(config.get("run", {}).get("text_pair_column"))


@dataclass
class LoadedRun:
    """A run's model ready to answer, with the run's record at hand (``metrics``, ``config``)."""

    directory: Path
    metrics: RunRecord
    config: SavedConfig
    model_dir: Path
    max_length: int
    label_names: list[str]
    pairs: bool               # whether the task's examples are text pairs
    predictor: Any            # compress.quantize.predictors.Predictor
    tokenizer: TextTokenizer  # the run's own: compress.inference.tokenize

    @property
    def regression(self) -> bool:
        return self.metrics.student.config is not None and self.metrics.student.config.get("num_labels") == 1

    @property
    def backend(self) -> str:
        return self.predictor.backend

    @property
    def dtype(self) -> str:
        return self.predictor.dtype

    def _check(self, texts: Sequence[str], text_pairs: Sequence[str] | None) -> None:
        if isinstance(texts, str):
            raise CompressError("give a list of texts, not one string (wrap it: [text]).")
        if not texts:
            raise CompressError("no texts to answer: give at least one.")
        if text_pairs is not None and not self.pairs:
            raise CompressError(f"{self.directory} answers single texts; its task has no text pairs.")
        if text_pairs is None and self.pairs:
            raise CompressError(f"{self.directory} answers text pairs; give each text its pair.")
        if text_pairs is not None and len(text_pairs) != len(texts):
            raise CompressError(f"{len(texts)} texts and {len(text_pairs)} pairs: give one pair per text.")

    def logits(self, texts: Sequence[str], text_pairs: Sequence[str] | None = None, *, batch_size: int = 32,
               show_progress: bool = False) -> np.ndarray:
        """The model's logits (texts x classes; a regression's one column), in the order of ``texts``."""
        self._check(texts, text_pairs)
        if batch_size < 1:
            raise CompressError(f"--batch-size must be at least 1, got {batch_size}.")
        features = self.tokenizer.features(texts, text_pairs, self.max_length)
        batches = length_sorted_batches([len(f["input_ids"]) for f in features], batch_size)
        out: np.ndarray | None = None
        shown = show_progress and len(texts) >= PROGRESS_MIN_TEXTS
        for batch in _with_progress(batches, f"answering {len(texts)} texts", shown):
            logits = self.predictor(pad_features([features[i] for i in batch], self.tokenizer.pad_token_id))
            if out is None:
                out = np.empty((len(texts), logits.shape[-1]), dtype=np.float32)
            out[batch] = logits
        assert out is not None
        return out

    def predict(self, texts: Sequence[str], text_pairs: Sequence[str] | None = None, *, batch_size: int = 32,
                show_progress: bool = False) -> list[Answer]:
        """What the model answers for each text (and its pair): the class and its probability, or the value."""
        logits = self.logits(texts, text_pairs, batch_size=batch_size, show_progress=show_progress)
        pairs = list(text_pairs) if text_pairs is not None else [None] * len(texts)
        if self.regression:
            return [Answer(t, p, None, float(row[0]), None) for t, p, row in zip(texts, pairs, logits, strict=True)]
        shifted = np.exp(logits - logits.max(-1, keepdims=True))
        probabilities = shifted / shifted.sum(-1, keepdims=True)
        names = self.label_names or [str(i) for i in range(logits.shape[-1])]
        return [Answer(t, p, names[int(row.argmax())], float(row.max()),
                       {name: float(q) for name, q in zip(names, row, strict=True)})
                for t, p, row in zip(texts, pairs, probabilities, strict=True)]

    def __call__(self, texts: str | Sequence[str], **options: Any) -> list[dict[str, str | float]]:
        """As a ``transformers`` text-classification pipeline answers: ``[{"label": ..., "score": ...}]`` (a
        regression's ``{"value": ...}``), one per text; one text may be given as a string."""
        answers = self.predict([texts] if isinstance(texts, str) else texts, **options)
        return [{"value": a.score} if a.label is None else {"label": a.label, "score": a.score} for a in answers]


def load_run(run_dir: Path | str, *, threads: int | None = None) -> LoadedRun:
    """A finished run's model on its own runtime, checked against the digests its run recorded; ``threads``: how
    many the runtime computes on (default: every CPU)."""
    run_dir, record, config = finished_run(run_dir)
    model_dir = model_dir_of(run_dir)
    check_model_files(run_dir, record, model_dir)
    threads = threads or os.cpu_count() or 1
    manifest = read_manifest(model_dir) if model_dir.name == ARTEFACT_DIR else None
    # ONNX Runtime and OpenVINO answer without torch: neither it nor transformers is imported for them
    if manifest is not None and manifest["backend"] in RUNTIME_BACKENDS:
        predictor = runtime_predictor(model_dir, manifest, threads)
    else:
        predictor = _torch_predictor(model_dir, threads)
    return LoadedRun(run_dir, record, config, model_dir, int(config.get("max_length") or record.seq_len),
                     list(record.dataset.label_names or []), takes_pairs(record, config), predictor,
                     load_tokenizer(model_dir))


def _torch_predictor(model_dir: Path, threads: int) -> Any:
    """A model run by PyTorch: a student checkpoint, or an artefact of the torch backend."""
    import torch

    torch.set_num_threads(threads)
    if model_dir.name == ARTEFACT_DIR:
        from compress.quantize.artefacts import load_artefact

        return load_artefact(model_dir, threads=threads)
    from compress.models.checkpoints import load_encoder
    from compress.quantize.predictors import TorchPredictor

    return TorchPredictor(load_encoder(model_dir).model)


def _with_progress(batches: list[list[int]], description: str, show: bool) -> Iterator[list[int]]:
    """The batches, under a progress bar on stderr when ``show`` (without a terminal: a line every tenth), drawn by
    rich, not by :func:`compress.training.with_progress`, which imports torch."""
    if not show:
        yield from batches
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("ETA"), TimeRemainingColumn(), console=Console(stderr=True)) as progress:
        bar = progress.add_task(escape(description), total=len(batches))
        plain_every = 0 if progress.console.is_terminal else max(1, len(batches) // 10)
        for done, batch in enumerate(batches, 1):
            yield batch
            progress.update(bar, advance=1)
            if plain_every and done % plain_every == 0:
                progress.console.print(f"{escape(description)}: {done}/{len(batches)} batches")
