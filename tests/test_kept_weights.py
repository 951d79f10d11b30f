"""The weights a stage keeps: chosen at evaluations inside epochs on a score the caller gives (the divergence from the
teacher), from the trained weights or their running average, never unannealed when patience stops a stage, and carried
whole through a checkpoint."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import run_cli, tiny_config

from compress.kept_weights import WeightAverage
from compress.models.encoder import Encoder
from compress.teachers.finetune import hard_label_loss
from compress.training import TrainConfig, train_stage

CPU = torch.device("cpu")


def _batches(epoch: int, count: int = 6):
    g = torch.Generator().manual_seed(epoch)
    ids = torch.randint(1, 101, (count, 4, 10), generator=g)
    return [{"input_ids": b, "attention_mask": torch.ones_like(b), "token_type_ids": torch.zeros_like(b),
             "labels": b[:, 0] % 3} for b in ids]


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_kept_weights_are_those_the_divergence_scored_best_at_evaluations_inside_epochs(tmp_path):
    """Two epochs of six steps, evaluated every two: six evaluations; the third (after step 6, the first epoch's end)
    is closest to the teacher, so the stage ends holding those weights, whatever the gold metric says."""
    torch.manual_seed(0)
    model = Encoder(tiny_config())
    snapshots: list[dict[str, torch.Tensor]] = []
    values = [0.9, 0.5, 0.1, 0.4, 0.3, 0.2]

    def divergence(logits: torch.Tensor) -> float:
        snapshots.append(_weights(model))
        return values[len(snapshots) - 1]

    log = tmp_path / "log.jsonl"
    with open(log, "w") as f:
        result = train_stage(model, hard_label_loss, _batches, lambda: _batches(9), TrainConfig(
            epochs=2, lr=1e-3, select="divergence", eval_every=2), device=CPU, show_progress=False,
            divergence_fn=divergence, log=f)
    assert len(snapshots) == 6
    assert _same(_weights(model), snapshots[2]) and result.kept_step == 6 and not result.kept_average
    dev = [json.loads(line) for line in log.read_text().splitlines() if '"dev"' in line]
    assert [r["after_step"] for r in dev] == [2, 4, 6, 8, 10, 12]
    assert [r["divergence"] for r in dev] == values and all("accuracy" in r for r in dev)   # gold stays in the log
    assert [r.get("kept", False) for r in dev] == [True, True, True, False, False, False]
    assert len(result.history) == 2 and result.best_epoch == 1 and result.best_dev["divergence"] == 0.1


def test_the_running_average_follows_its_formula_and_can_be_the_weights_kept():
    """The average is ``decay * average + (1 - decay) * weights`` after every step, its first step a copy; offered
    beside the trained weights at each evaluation, it is kept where it scores better."""
    torch.manual_seed(0)
    a, b = Encoder(tiny_config()), Encoder(tiny_config())
    average = WeightAverage(a, decay=0.75)
    average.update(a)
    average.update(b)
    for name, kept in average.model.named_parameters():
        expected = 0.75 * dict(a.named_parameters())[name] + 0.25 * dict(b.named_parameters())[name]
        torch.testing.assert_close(kept, expected, rtol=0, atol=1e-6)

    torch.manual_seed(0)
    model = Encoder(tiny_config())
    calls: list[dict[str, torch.Tensor]] = []

    def divergence(logits: torch.Tensor) -> float:
        calls.append(_weights(model))
        return [0.5, 0.6, 0.4, 0.3][len(calls) - 1]   # epoch 1: trained, average; epoch 2: trained, average

    result = train_stage(model, hard_label_loss, _batches, lambda: _batches(9), TrainConfig(
        epochs=2, lr=1e-3, select="divergence", average=0.9), device=CPU, show_progress=False,
        divergence_fn=divergence)
    assert result.kept_average and result.kept_step == 12
    assert not _same(_weights(model), calls[2])   # the average's weights, not the trained ones of that evaluation


def test_a_stage_stopped_by_patience_cools_down_to_a_zero_learning_rate_before_it_is_judged(tmp_path):
    """Patience 1 stops the stage after epoch 2 (no better than epoch 1); before stopping, the learning rate decays
    linearly to zero over a tenth of an epoch (2 of its 20 steps), and the weights reached are evaluated and may be
    kept."""
    torch.manual_seed(0)
    model = Encoder(tiny_config())
    values = iter([0.2, 0.3, 0.1])   # epoch 1, epoch 2 (worse: patience), after the cool-down (best)

    log = tmp_path / "log.jsonl"
    with open(log, "w") as f:
        result = train_stage(model, hard_label_loss, lambda e: _batches(e, 20), lambda: _batches(9), TrainConfig(
            epochs=4, lr=1e-3, warmup_ratio=0.0, select="divergence", patience=1), device=CPU, show_progress=False,
            divergence_fn=lambda logits: next(values), log=f)
    assert result.stopped_early and result.stop_reason == "patience" and result.cooldown_steps == 2
    assert result.steps == 42 and result.kept_step == 42
    steps = [json.loads(line) for line in log.read_text().splitlines() if '"loss"' in line and "lr" in line]
    lrs = [r["lr"] for r in steps]
    assert lrs[-1] == pytest.approx(0.0, abs=1e-12) and lrs[-2] > 0   # after its last step: zero
    assert lrs[-2] == pytest.approx(lrs[-3] / 2, rel=1e-6)   # half way down the two steps from where it stood
    dev = [json.loads(line) for line in log.read_text().splitlines() if '"dev"' in line]
    assert [r["after_step"] for r in dev] == [20, 40, 42] and dev[-1].get("kept")


def test_a_resumed_stage_keeps_its_average_and_its_best_weights_and_ends_as_one_never_stopped(tmp_path, monkeypatch):
    """A checkpoint inside the second epoch holds the running average and the weights kept so far: the stage resumed
    from it ends with the weights of a stage never stopped."""
    from compress.resume import Resume

    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path))
    config = TrainConfig(epochs=2, lr=1e-3, seed=3, select="divergence", eval_every=3, average=0.8)

    def train(checkpoints=None, stop_at: int | None = None):
        torch.manual_seed(0)
        model, steps = Encoder(tiny_config()), []

        def loss_fn(m, batch):
            if stop_at is not None and len(steps) == stop_at:
                raise KeyboardInterrupt
            steps.append(1)
            return hard_label_loss(m, batch)

        # a divergence of the logits themselves, so the trained weights and the average score differently
        result = train_stage(model, loss_fn, _batches, lambda: _batches(9), config, device=CPU, show_progress=False,
                             divergence_fn=lambda logits: float(logits.square().mean()), checkpoints=checkpoints)
        return model, result

    reference, expected = train()
    with pytest.raises(KeyboardInterrupt):
        train(Resume("kept", "a test stage", every=4).stage(0, []), stop_at=10)
    resume = Resume("kept", "a test stage", every=4)
    saved = resume.saved["train"]
    assert saved["step"] == 8 and saved["average"] is not None and saved["kept"]["weights"] is not None
    model, result = train(resume.stage(0, []))
    assert _same(_weights(model), _weights(reference))
    assert (result.kept_step, result.kept_average) == (expected.kept_step, expected.kept_average)


@pytest.mark.parametrize("value", ["0", "-3"])
def test_an_evaluation_interval_that_is_not_a_positive_number_of_steps_is_refused_in_one_line(tmp_path, value):
    done = run_cli("run", "distilbert", "--eval-every", value, "--out", str(tmp_path / "never"),
                   env={"COMPRESS_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"--eval-every is a number of training steps between dev evaluations, 1 or more, got {value}" in done.stderr
    assert not (tmp_path / "never").exists()
