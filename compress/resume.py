"""Training that survives an interruption: checkpoints of an unfinished run, and continuing from them.

A run (or a cache entry that trains: a fine-tuned teacher, a general-distilled student, a pre-trained
encoder) keeps its training state in ``cache_dir()/unfinished/KEY/state.pt``, where KEY is a digest of
everything that decides what it trains: the same command finds it again, wherever it writes its result.
The state is the model, the optimizer, the scheduler, the random generators, the position in the epoch,
the best epoch so far, the stages already finished and the log written so far; it is saved every
``--checkpoint-every`` steps and at every epoch end (before the dev evaluation and after it), through a
temporary file and a rename, so a kill at any moment leaves the previous checkpoint whole; its sha256 is
recorded beside it (``state.sha256.json``) and checked before it is trusted, so a damaged checkpoint is
reported in one line and the training starts afresh instead of continuing from corrupt weights. Re-running
the command after Ctrl-C, ``kill -9`` or a lost node continues from it (and says so in one line); with
the same seed it ends with the same metrics as a run that was never stopped. The directory is removed
when the run completes: checkpoints are never part of a run directory.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import torch

from compress.cache import sha256_file
from compress.distributed import world
from compress.kept_weights import KeptState
from compress.paths import atomic_file, atomic_write_text, cache_dir, notice
from compress.train_config import DEFAULT_EVERY, StageRecord

FORMAT = 3   # 2: the state's sha256 recorded beside it; 3: the kept weights and the running average


class RngState(TypedDict, total=False):
    """The random generators' states (``cuda`` only where CUDA is)."""

    torch: torch.Tensor
    numpy: tuple[str, torch.Tensor, int, int, float]
    cuda: list[torch.Tensor]


class StageProgress(TypedDict):
    """A stage's :class:`compress.training.StageResult` so far, as ``dataclasses.asdict`` makes it (the checkpoint
    holds plain values: ``torch.load(weights_only=True)`` reads no dataclass); the keys are its fields."""

    history: list[dict[str, str | int | float]]
    best_epoch: int
    best_dev: dict[str, float] | None
    seconds: float
    stopped_early: bool
    stop_reason: str | None
    warnings: list[str]
    cooldown_steps: int | None
    kept_step: int
    kept_average: bool


class TrainState(TypedDict):
    """One training stage's state at a checkpoint (:func:`compress.training.train_stage` writes and reads it)."""

    epoch: int
    batches: int                  # batches of ``epoch`` already trained (0: at the epoch's end)
    evaluating: bool              # saved after the epoch's training, before its evaluation
    step: int
    model: dict[str, torch.Tensor]
    extra: list[torch.Tensor]     # the objective's own parameters (projections)
    optimizer: dict[str, Any]     # torch's own state dicts: whatever the optimizer and the schedule hold
    scheduler: dict[str, Any]
    scaler: dict[str, float]      # GradScaler's scale, factors, interval and tracker (empty unless fp16)
    rng: RngState
    kept: KeptState               # the best weights evaluated so far (compress.kept_weights)
    average: dict[str, torch.Tensor] | None   # the running average of the weights, where the stage keeps one
    bad_epochs: int
    result: StageProgress


class Checkpoint(TypedDict):
    """state.pt: the stage being trained, the stages finished before it, the log so far."""

    format: int
    time: float
    stage: int
    stages_done: list[StageRecord]
    log: str
    train: TrainState
    generators: list[torch.Tensor]


@dataclass
class StageCheckpoints:
    """What a training stage needs to checkpoint: how often, where to, and the state to continue from."""

    every: int                               # steps between checkpoints (0: epoch ends only)
    save: Callable[[TrainState], None]       # stores the stage's training state
    restored: TrainState | None              # the stage's state to continue from, if any


def rng_state() -> RngState:
    """The random generators a training step draws from (dropout, shuffling helpers)."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    state = RngState(torch=torch.get_rng_state(),
                     numpy=(kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss, gauss))
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: RngState) -> None:
    torch.set_rng_state(state["torch"])
    kind, keys, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, gauss))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


class Resume:
    """The checkpoints of one unfinished training job, identified by ``key`` (any JSON-able value); used as
    ``with Resume(...) as resume:`` around the job, which deletes them when the block completes."""

    def __init__(self, key: Any, what: str, every: int = DEFAULT_EVERY) -> None:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]
        self.directory = cache_dir() / "unfinished" / digest
        self.file = self.directory / "state.pt"
        self.digests = self.directory / "state.sha256.json"   # what state.pt's sha256 may be
        self.what = what
        self.every = every
        self.stored: str | None = None   # the sha256 of the state.pt this process read or wrote
        self.saved = self._load()
        self.said = False

    def _load(self) -> Checkpoint | None:
        if not self.file.is_file():
            return None
        try:
            digests = json.loads(self.digests.read_text())["sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            digests = None
        if not isinstance(digests, list):  # lost, unreadable, or a checkpoint of format 1 (written before digests were)
            self._afresh(f"has no readable record of its sha256 ({self.digests.name}), so it cannot be trusted")
            return None
        digest = sha256_file(self.file)
        if digest not in digests:  # damaged, or written by no checkpoint of ours
            self._afresh(f"is damaged (its sha256 is not the one recorded in {self.digests.name})")
            return None
        try:
            state = torch.load(self.file, map_location="cpu", weights_only=True)
        except Exception as e:  # a checkpoint that cannot be read is not worth failing the run for
            self._afresh(f"cannot be read ({type(e).__name__})")
            return None
        found = state.get("format") if isinstance(state, dict) else None
        if found != FORMAT:
            self._afresh(f"was written by another version of compress (format {found}; this one reads {FORMAT})")
            return None
        self.stored = digest
        return state

    def _afresh(self, why: str) -> None:
        """Say in one line (once, from the main process) that the checkpoint is not used, and why."""
        if world().is_main:
            notice(f"the checkpoint of {self.what} in {self.file} {why}; starting from the beginning.")

    def _store(self, state: Checkpoint) -> None:
        """Write ``state`` so that a kill at any moment leaves a checkpoint that passes its check: the new
        file's digest is recorded (beside the old one) before the file takes ``state.pt``'s place, and the
        old digest goes once it has."""
        with atomic_file(self.file) as tmp:
            torch.save(state, tmp)
            new = sha256_file(tmp)
            atomic_write_text(self.digests, json.dumps({"sha256": [new, *([self.stored] if self.stored else [])]}))
        atomic_write_text(self.digests, json.dumps({"sha256": [new]}))
        self.stored = new

    def finished_stages(self) -> list[StageRecord]:
        """The summaries of the stages that were complete when the checkpoint was saved."""
        return list(self.saved["stages_done"]) if self.saved else []

    def seconds_before(self) -> float:
        """The training seconds spent before the checkpoint: its finished stages' and the unfinished stage's."""
        if not self.saved:
            return 0.0
        return sum(s.get("seconds", 0.0) for s in self.saved["stages_done"]) + self.saved["train"]["result"]["seconds"]

    def log(self) -> str:
        """The log the run had written when the checkpoint was saved."""
        return self.saved["log"] if self.saved else ""

    def stage(self, index: int, done: list[StageRecord], log: Path | None = None,
              generators: tuple[torch.Generator, ...] = ()) -> StageCheckpoints:
        """Checkpoints for stage ``index`` (after the stages ``done``), continuing from the saved state
        when it was saved during this stage. ``log`` is the run's log file, saved with the state;
        ``generators`` are random generators of the caller's own (masking), saved and restored with it."""
        restored = None
        if self.saved and self.saved["stage"] == index:
            restored = self.saved["train"]
            for generator, state in zip(generators, self.saved["generators"]):
                generator.set_state(state)
            if not self.said:
                self.said = True
                saved_at = time.strftime("%H:%M:%S", time.localtime(self.saved["time"]))
                if not restored["batches"]:
                    where = f"the end of epoch {restored['epoch']}"
                elif restored.get("evaluating"):
                    where = f"the end of epoch {restored['epoch'] + 1}'s training, before its evaluation"
                else:
                    where = f"epoch {restored['epoch'] + 1}, step {restored['step']}"
                if world().is_main:
                    notice(f"resuming {self.what} from its checkpoint at {where} (saved {saved_at}); "
                           f"`rm -r {self.directory}` starts it afresh.")

        def save(train: TrainState) -> None:
            if not world().is_main:
                return
            self._store(Checkpoint(format=FORMAT, time=time.time(), stage=index, stages_done=list(done),
                                   log=log.read_text() if log is not None and log.is_file() else "", train=train,
                                   generators=[g.get_state() for g in generators]))

        return StageCheckpoints(self.every, save, restored)

    def __enter__(self) -> Resume:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """The job completed (the block ended without an exception): its checkpoints go."""
        if kind is None and world().is_main:
            shutil.rmtree(self.directory, ignore_errors=True)
