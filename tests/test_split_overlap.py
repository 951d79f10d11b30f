"""Dev and test rows whose text also occurs in train: counted, reported in one line, dropped with --dedupe."""

from __future__ import annotations

import csv
import json
from dataclasses import asdict
from pathlib import Path

import pytest
from helpers import make_tiny_teacher, run_cli

from compress.data import load as load_module
from compress.data.load import load_task
from compress.errors import CompressError

WARNING = ("3 of 8 test rows and 2 of 6 dev rows of repeated.csv also occur in the training split; accuracy on "
           "them measures memory, not generalisation: deduplicate the file or pass --dedupe.")


def write_repeated_csv(path: Path) -> Path:
    """24 distinct training rows, then dev and test rows of which exactly 2 (dev) and 3 (test) repeat a
    training text, one of them under the other label (the text decides, not the label), and one test
    row that repeats a dev row only (not a leak from train)."""
    train = [(f"train review number {i} {'good' if i % 2 else 'bad'}", "pos" if i % 2 else "neg", "train")
             for i in range(24)]
    dev = [(train[0][0], "neg", "dev"), (train[1][0], "neg", "dev"),  # the second under the other label
           *((f"dev review {i}", "pos" if i % 2 else "neg", "dev") for i in range(4))]
    test = [(train[2][0], "neg", "test"), (train[3][0], "pos", "test"), (train[4][0], "neg", "test"),
            ("dev review 0", "neg", "test"),
            *((f"test review {i}", "pos" if i % 2 else "neg", "test") for i in range(4))]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label", "split"])
        writer.writerows([*train, *dev, *test])
    return path


@pytest.fixture
def fresh_warnings(monkeypatch):
    """Forget which tasks this process already warned about, so each test sees its own line."""
    monkeypatch.setattr(load_module, "_WARNED", set())


def test_rows_repeated_from_train_are_counted_exactly_and_reported_once(tmp_path, capsys, fresh_warnings):
    path = write_repeated_csv(tmp_path / "repeated.csv")
    task = load_task(path)
    assert {name: len(split) for name, split in task.splits.items()} == {"train": 24, "dev": 6, "test": 8}
    assert task.train_overlap() == {"dev": 2, "test": 3}
    assert task.overlap_text() == "3 of 8 test rows and 2 of 6 dev rows"
    load_task(path)  # the same task again (a pipeline's next step): no second line
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"! {WARNING}"]


def test_a_text_pair_counts_only_when_both_texts_repeat(tmp_path, fresh_warnings):
    rows = [{"text": f"premise {i}", "text_pair": f"hypothesis {i}", "label": i % 2, "split": "train"}
            for i in range(10)]
    rows += [{"text": "premise 0", "text_pair": "hypothesis 0", "label": 0, "split": "test"},   # both repeat
             {"text": "premise 1", "text_pair": "another hypothesis", "label": 1, "split": "test"},
             {"text": "premise 9", "text_pair": "hypothesis 9", "label": 1, "split": "dev"},   # both repeat
             {"text": "new premise", "text_pair": "hypothesis 2", "label": 0, "split": "dev"}]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    task = load_task(path)
    assert task.has_pairs and task.train_overlap() == {"dev": 1, "test": 1}


def test_dedupe_drops_them_and_changes_the_fingerprint(tmp_path, capsys, fresh_warnings):
    from compress.runs.config import RunConfig, result_settings

    path = write_repeated_csv(tmp_path / "repeated.csv")
    whole, deduped = load_task(path), load_task(path, dedupe=True)
    assert {name: len(split) for name, split in deduped.splits.items()} == {"train": 24, "dev": 4, "test": 5}
    assert deduped.train_overlap() == {"dev": 0, "test": 0}
    assert deduped.dropped == {"dev": 2, "test": 3}
    assert "--dedupe" in deduped.split_info.method
    assert "dev review 0" in deduped.splits["test"]["text"]  # a repeat of a dev row is no leak from train
    # A deduplicated task never shares a cache entry (keyed on both) or a run's fingerprint with the whole one.
    assert deduped.fingerprint != whole.fingerprint
    assert deduped.content_digest() != whole.content_digest()
    assert deduped.split_fingerprints["train"] == whole.split_fingerprints["train"]
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "! --dedupe: dropping 3 of 8 test rows and 2 of 6 dev rows of repeated.csv whose text also " \
                      "occurs in the training split."
    # ... nor do the settings that decide a result: compare reruns a run made without it; one recorded
    # before the option existed counts as made without it.
    plain = result_settings(asdict(RunConfig(method="int8")))
    assert result_settings(asdict(RunConfig(method="int8", dedupe=True))) != plain
    assert result_settings({k: v for k, v in asdict(RunConfig(method="int8")).items() if k != "dedupe"}) == plain


def test_dedupe_that_would_empty_a_split_fails_in_one_sentence(tmp_path, fresh_warnings):
    # The file: 40 rows, each three times; with a seeded 80/10/10 split every test text is also in train.
    rows = [(f"review number {i} is {'good' if i % 2 else 'bad'}", "pos" if i % 2 else "neg") for i in range(40)]
    path = tmp_path / "thrice.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text", "label"), *rows * 3])
    assert load_task(path).train_overlap() == {"dev": 12, "test": 12}
    with pytest.raises(CompressError, match="--dedupe would leave no dev split"):
        load_task(path, dedupe=True)


def test_the_warning_and_the_report_through_the_cli(tmp_path):
    teacher = make_tiny_teacher(tmp_path / "teacher")
    data = write_repeated_csv(tmp_path / "repeated.csv")
    env = {"COMPRESS_CACHE": str(tmp_path / "cache")}
    common = ("--teacher", str(teacher), "--dataset", str(data), "--backend", "torch", "--threads", "1",
              "--teacher-epochs", "2", "--teacher-batch-size", "16", "--teacher-lr", "3e-3")

    done = run_cli("run", "int8", *common, "--out", str(tmp_path / "whole"), env=env)
    assert done.returncode == 0, done.stderr
    assert [line for line in done.stderr.splitlines() if "training split" in line] == [f"! {WARNING}"]
    report = (tmp_path / "whole" / "report.md").read_text()
    assert "**Overlap with training:** 3 of 8 test rows and 2 of 6 dev rows also occur in the training split" \
        in report
    whole = json.loads((tmp_path / "whole" / "metrics.json").read_text())["dataset"]
    assert whole["in_train"] == {"dev": 2, "test": 3} and "dropped" not in whole

    done = run_cli("run", "int8", *common, "--dedupe", "--out", str(tmp_path / "deduped"), env=env)
    assert done.returncode == 0, done.stderr
    assert "accuracy on them measures memory" not in done.stderr
    report = (tmp_path / "deduped" / "report.md").read_text()
    assert "--dedupe dropped 3 test rows and 2 dev rows whose text also occurs in the training split" in report
    assert "Overlap with training" not in report
    deduped = json.loads((tmp_path / "deduped" / "metrics.json").read_text())["dataset"]
    assert deduped["sizes"] == {"train": 24, "dev": 4, "test": 5} and deduped["dropped"] == {"dev": 2, "test": 3}
    assert deduped["fingerprint"] != whole["fingerprint"]
    assert json.loads((tmp_path / "deduped" / "config.json").read_text())["run"]["dedupe"] is True
