"""Transfer data and the recipes named by cost: what a stage learns from (copies and texts without gold labels),
how long it trains, and the refusals of bad input."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from helpers import make_tiny_teacher, run_cli, write_tiny_csv

from compress.distill.losses import NO_LABEL, hard_ce
from compress.distill.recipe import LossTerm, Stage
from compress.distill.schedule import SCHEDULES, get_schedule
from compress.distill.stage import stage_config
from compress.errors import CompressError
from compress.runs.config import RunConfig, result_settings
from compress.train_config import TrainSettings


def test_hard_ce_learns_from_the_labelled_rows_only():
    torch.manual_seed(0)
    logits = torch.randn(6, 3, requires_grad=True)
    labels = torch.tensor([2, NO_LABEL, 0, NO_LABEL, 1, NO_LABEL])
    kept = labels != NO_LABEL
    expected = -torch.log_softmax(logits[kept], dim=-1).gather(1, labels[kept][:, None]).mean()
    assert hard_ce(logits, labels).item() == pytest.approx(expected.item(), rel=1e-6)
    # a batch of copies alone: no loss and no gradient, not NaN
    none = hard_ce(logits, torch.full((6,), NO_LABEL))
    none.backward()
    assert none.item() == 0.0 and torch.equal(logits.grad, torch.zeros_like(logits))


def test_hard_ce_of_a_regression_skips_the_rows_without_a_value():
    out = torch.tensor([[0.5], [1.0], [2.0], [-1.0]])
    values = torch.tensor([1.5, float("nan"), 2.0, float("nan")])
    assert hard_ce(out, values).item() == pytest.approx(((0.5 - 1.5) ** 2 + 0.0) / 2)
    assert hard_ce(out, torch.full((4,), float("nan"))).item() == 0.0


def test_a_recipe_raises_every_stage_to_its_ceiling_and_a_run_setting_wins():
    stage = Stage("distill", [LossTerm("hard_ce")], epochs=3, lr=1e-4, warmup_ratio=0.2, decay="cosine")
    config = stage_config(stage, TrainSettings(min_epochs=10, patience=3))
    assert (config.epochs, config.patience, config.warmup_ratio, config.decay) == (10, 3, 0.2, "cosine")
    assert stage_config(replace_epochs(stage, 12), TrainSettings(min_epochs=10)).epochs == 12
    assert stage_config(stage, TrainSettings()).epochs == 3

    from compress.runs.writer import train_settings

    thorough = train_settings(RunConfig("distilbert", recipe="thorough", device="cpu"))
    assert (thorough.min_epochs, thorough.patience) == (get_schedule("thorough").epochs, 3)
    given = train_settings(RunConfig("distilbert", recipe="thorough", epochs=2, patience=1, device="cpu"))
    assert (given.min_epochs, given.patience) == (None, 1)
    assert train_settings(RunConfig("distilbert", recipe="fast", device="cpu")).patience is None


def replace_epochs(stage: Stage, epochs: int) -> Stage:
    from dataclasses import replace

    return replace(stage, epochs=epochs)


def test_the_learning_rate_decays_as_the_stage_says():
    from compress.training import _schedule

    def rates(decay: str) -> list[float]:
        optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
        scheduler = _schedule(optimizer, 10, 0.2, decay)
        out = []
        for _ in range(10):
            out.append(scheduler.get_last_lr()[0])
            optimizer.step()
            scheduler.step()
        return out

    linear, cosine, constant = rates("linear"), rates("cosine"), rates("constant")
    assert linear[:2] == pytest.approx([0.5, 1.0]) and cosine[:2] == pytest.approx([0.5, 1.0])
    assert linear[6] == pytest.approx(0.5) and cosine[6] == pytest.approx(0.5)      # half way down
    assert linear[4] == pytest.approx(0.75) and cosine[4] == pytest.approx((1 + 2 ** -0.5) / 2)
    assert constant[2:] == [1.0] * 8


def test_the_recipe_and_the_transfer_texts_content_are_part_of_a_runs_result(tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("one\ntwo\n", encoding="utf-8")
    moved = tmp_path / "moved.txt"
    moved.write_text("one\ntwo\n", encoding="utf-8")

    def settings(**given):
        from dataclasses import asdict

        return result_settings(asdict(RunConfig("distilbert", device="cpu", **given)))

    assert settings(recipe="fast") != settings(recipe="default") == settings()
    assert settings(transfer_text=str(texts)) == settings(transfer_text=str(moved)) != settings()
    moved.write_text("one\nthree\n", encoding="utf-8")
    assert settings(transfer_text=str(texts)) != settings(transfer_text=str(moved))


@pytest.mark.parametrize(("given", "expected"), [
    ({"recipe": "slow"}, "unknown --recipe 'slow'; use one of fast, default, thorough."),
    ({"transfer_text": "no/such.txt"}, "does not exist"),
    ({"transfer_text": "EMPTY"}, "is empty"),
    ({"transfer_text": "BLANK"}, "is empty"),
    ({"transfer_text": "LATIN1"}, "is not UTF-8"),
    ({"transfer_text": "DIR"}, "is not a file"),
    ({"decay": "exp"}, "unknown --decay"),
    ({"warmup": 1.0}, "--warmup"),
])
def test_bad_recipes_and_transfer_texts_are_refused_in_one_sentence(tmp_path, given, expected):
    files = {"EMPTY": b"", "BLANK": b"\n  \n", "LATIN1": "caf\xe9 cr\xe8me\n".encode("latin-1")}
    for key, value in given.items():
        if value in files:
            (tmp_path / value).write_bytes(files[value])
            given[key] = str(tmp_path / value)
        elif value == "DIR":
            given[key] = str(tmp_path)
    with pytest.raises(CompressError, match=expected.replace("(", r"\(").replace("[", r"\[")):
        RunConfig("distilbert", device="cpu", **given)
    assert set(SCHEDULES) == {"fast", "default", "thorough"}


def test_a_run_learns_from_the_users_text_and_says_so(tmp_path):
    # The real CLI on a tiny teacher: the fast recipe makes no copies, so the stage's examples are the training
    # sentences and the file's texts (blank lines left out); the cache holds them under transfer/.
    teacher, csv = make_tiny_teacher(tmp_path / "teacher"), write_tiny_csv(tmp_path / "reviews.csv")
    texts = tmp_path / "unlabeled.txt"
    texts.write_text("a quiet, lovely film\n\nthe plot never lands\nI laughed throughout\n", encoding="utf-8")
    out = tmp_path / "run"
    done = run_cli("run", "distilbert", "--teacher", str(teacher), "--dataset", str(csv), "--out", str(out),
                   "--recipe", "fast", "--transfer-text", str(texts), "--epochs", "2", "--batch-size", "8",
                   "--lr", "1e-3", "--teacher-epochs", "8", "--teacher-lr", "3e-3", "--teacher-batch-size", "8",
                   "--json", env={"COMPRESS_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    metrics = json.loads(done.stdout)
    (stage,) = metrics["stages"]
    assert stage["examples_per_epoch"] == metrics["dataset"]["sizes"]["train"] + 3
    assert stage["epochs"] == stage["max_epochs"] == 2 and stage["steps"] == 2 * -(-stage["examples_per_epoch"] // 8)
    saved = json.loads((out / "config.json").read_text())["run"]
    assert saved["recipe"] == "fast" and saved["transfer_sha256"] is not None
    assert len(list((tmp_path / "cache" / "transfer").iterdir())) == 1
    # the gold-label loss saw the training sentences only: its log has a value for every step, none NaN
    losses = [json.loads(line).get("hard_ce") for line in (out / "log.jsonl").read_text().splitlines()]
    assert all(value == value for value in losses if value is not None) and any(losses)
