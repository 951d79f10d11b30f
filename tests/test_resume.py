"""Interrupted runs continue from their last checkpoint: real processes, real signals, real files."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest
from helpers import HANG_GUARD, REPO, interruptible_run, run_cli, wait_for

EPOCHS = 3


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return interruptible_run(tmp_path_factory.mktemp("resume"), EPOCHS)


def _losses(run_dir) -> list[tuple[int, float]]:
    lines = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in lines if "step" in r]


def _checkpoints(tiny) -> list:
    return list((tiny["root"] / "cache" / "unfinished").glob("*/state.pt"))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_an_interrupted_run_resumes_and_ends_as_an_uninterrupted_one(tiny, signum):
    out = tiny["root"] / f"interrupted-{signum.name}"
    process = subprocess.Popen([sys.executable, "-m", "compress", *tiny["args"], "--out", str(out)], cwd=REPO,
                               env={**os.environ, **tiny["env"]}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        wait_for(lambda: _checkpoints(tiny), process, "the run's first checkpoint")
        process.send_signal(signum)   # the first checkpoint is the end of epoch 1 (before or after its evaluation)
        _, stderr = process.communicate(timeout=HANG_GUARD)
    finally:
        process.kill()
    assert process.returncode == (130 if signum == signal.SIGINT else -signal.SIGKILL), stderr
    assert not out.exists()       # nothing half-written in the run's place
    assert len(_checkpoints(tiny)) == 1

    done = run_cli(*tiny["args"], "--out", str(out), env=tiny["env"])
    assert done.returncode == 0, done.stderr
    resumed = re.search(r"resuming the run .* from its checkpoint at the end of epoch (\d)", done.stderr)
    assert resumed, done.stderr
    reference = _losses(tiny["reference"])
    steps_per_epoch = len(reference) // EPOCHS
    steps_trained = [int(s) for s in re.findall(r"step (\d+)/", done.stderr)]
    assert steps_trained and min(steps_trained) > int(resumed.group(1)) * steps_per_epoch  # epoch 1 not redone
    assert _losses(out) == reference   # the log before the checkpoint was kept, and every later loss is the same
    ours, theirs = (json.loads((d / "metrics.json").read_text())["student"] for d in (out, tiny["reference"]))
    assert (ours["accuracy"], ours["macro_f1"]) == (theirs["accuracy"], theirs["macro_f1"])
    metrics = json.loads((out / "metrics.json").read_text())   # its time counts the epoch before the checkpoint
    assert metrics["seconds"] >= sum(stage["seconds"] for stage in metrics["stages"]) - 0.1
    assert not _checkpoints(tiny)      # a finished run leaves no checkpoint behind


def test_a_stage_stopped_mid_epoch_continues_from_its_last_step_checkpoint(tmp_path, monkeypatch):
    """--checkpoint-every N: stopped between two epoch ends, the stage continues from the last N-step
    checkpoint (skipping the batches it had trained on) and ends with the weights and losses of a stage
    never stopped."""
    import torch
    from helpers import tiny_config

    from compress.models.encoder import Encoder
    from compress.resume import Resume
    from compress.teachers.finetune import hard_label_loss
    from compress.training import TrainConfig, train_stage

    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path))

    def batches(epoch: int):
        g = torch.Generator().manual_seed(epoch)
        ids = torch.randint(1, 101, (6, 4, 10), generator=g)
        return [{"input_ids": b, "attention_mask": torch.ones_like(b), "token_type_ids": torch.zeros_like(b),
                 "labels": b[:, 0] % 3} for b in ids]

    def train(checkpoints=None, stop_at: int | None = None):
        torch.manual_seed(0)
        model, losses = Encoder(tiny_config()), []

        def loss_fn(m, batch):
            if stop_at is not None and len(losses) == stop_at:
                raise KeyboardInterrupt   # what Ctrl-C raises, at a step that is not an epoch end
            loss, parts = hard_label_loss(m, batch)
            losses.append(loss.item())
            return loss, parts

        train_stage(model, loss_fn, batches, lambda: batches(9), TrainConfig(epochs=2, lr=1e-3, seed=3),
                    device=torch.device("cpu"), show_progress=False, checkpoints=checkpoints)
        return model, losses

    reference, reference_losses = train()
    with pytest.raises(KeyboardInterrupt):
        train(Resume("mid-epoch", "a test stage", every=4).stage(0, []), stop_at=10)   # checkpoints at 4 and 6, 8
    resume = Resume("mid-epoch", "a test stage", every=4)
    assert resume.saved["train"]["step"] == 8 and resume.saved["train"]["batches"] == 2   # epoch 2, batch 2
    model, losses = train(resume.stage(0, []))
    assert losses == reference_losses[8:]          # only the steps after the checkpoint, each as before
    for a, b in zip(model.state_dict().values(), reference.state_dict().values()):
        assert torch.equal(a, b)


def test_a_stage_stopped_during_its_evaluation_does_not_train_that_epoch_again(tmp_path, monkeypatch):
    """Pre-training evaluates for minutes after its last step: a stop then keeps the epoch's training."""
    import torch
    from helpers import tiny_config

    from compress.models.encoder import Encoder
    from compress.resume import Resume
    from compress.teachers.finetune import hard_label_loss
    from compress.training import TrainConfig, train_stage

    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path))
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 101, (5, 4, 10), generator=g)
    data = [{"input_ids": b, "attention_mask": torch.ones_like(b), "token_type_ids": torch.zeros_like(b),
             "labels": b[:, 0] % 3} for b in ids]

    def train(checkpoints=None, stop_evaluating: bool = False):
        torch.manual_seed(0)
        model, losses = Encoder(tiny_config()), []

        def loss_fn(m, batch):
            loss, parts = hard_label_loss(m, batch)
            losses.append(loss.item())
            return loss, parts

        def evaluate(evaluated):
            if stop_evaluating:
                raise KeyboardInterrupt
            return {"loss": -len(losses)}

        train_stage(model, loss_fn, lambda epoch: data, lambda: [], TrainConfig(epochs=1, lr=1e-3, metric="loss"),
                    device=torch.device("cpu"), show_progress=False, evaluate_fn=evaluate, checkpoints=checkpoints)
        return model, losses

    reference, _ = train()
    with pytest.raises(KeyboardInterrupt):
        train(Resume("evaluating", "a test stage").stage(0, []), stop_evaluating=True)  # every 500: none mid-epoch
    resume = Resume("evaluating", "a test stage")
    assert resume.saved["train"]["evaluating"] and resume.saved["train"]["batches"] == 5
    model, losses = train(resume.stage(0, []))
    assert losses == []   # the five steps were kept, only the evaluation ran again
    for a, b in zip(model.state_dict().values(), reference.state_dict().values()):
        assert torch.equal(a, b)


def test_a_callers_own_generator_is_saved_and_restored_with_the_stage(tmp_path, monkeypatch):
    """Pre-training draws its masks from a generator of its own: a resumed stage must draw what it would have."""
    import torch

    from compress.resume import Resume

    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path))
    generator = torch.Generator().manual_seed(5)
    torch.rand(7, generator=generator)
    Resume("masks", "a test stage").stage(0, [], generators=(generator,)).save({"epoch": 1, "batches": 0, "step": 1})
    expected = torch.rand(3, generator=generator)
    fresh = torch.Generator().manual_seed(5)
    checkpoints = Resume("masks", "a test stage").stage(0, [], generators=(fresh,))
    assert checkpoints.restored == {"epoch": 1, "batches": 0, "step": 1}
    assert torch.equal(torch.rand(3, generator=fresh), expected)
    with Resume("masks", "a test stage"):   # a job that completes deletes its checkpoints
        pass
    assert not list(tmp_path.glob("unfinished/*"))
