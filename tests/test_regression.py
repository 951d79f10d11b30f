"""Regression tasks: the named ``mr-score`` task on real human scores, a numeric label column, the losses of a
one-output head, and a regression compared end to end through the real CLI with its own metric."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import NEGATIVE, POSITIVE, assert_refused_before_work, make_tiny_teacher, run_cli
from scipy.stats import pearsonr

from compress.data.describe import describe_task
from compress.data.load import load_task
from compress.data.named import load_named
from compress.distill.losses import hard_ce, kd_kl, soft_ce
from compress.errors import CompressError
from compress.metrics import metrics_of

pytestmark = pytest.mark.minutes(4)   # on one CI worker: see tests/conftest.py


def test_mr_score_is_the_mr_sentences_with_their_human_scores():
    task, polarity = load_named("mr-score"), load_named("mr")
    assert task.regression and task.num_labels == 1 and task.label_names == []
    assert sum(len(split) for split in task.splits.values()) == 10312
    assert "stratified by score decile" in task.split_info.method
    scores = {i: s for split in task.splits.values() for i, s in zip(split["id"], split["label"], strict=True)}
    positive = {i: p for split in polarity.splits.values() for i, p in zip(split["id"], split["label"], strict=True)}
    ids = sorted(scores)
    assert all(-4 <= scores[i] <= 4 for i in ids)
    # the people's scores agree with MR's polarity, far from perfectly (the reason it is a task of its own)
    assert 0.85 < pearsonr([scores[i] for i in ids], [positive[i] for i in ids]).statistic < 0.95   # 0.909
    # each split keeps the targets' spread (stratified by decile)
    means = [np.mean(task.splits[name]["label"]) for name in ("train", "dev", "test")]
    assert max(means) - min(means) < 0.1
    described = describe_task(task)                 # what `compress data show mr-score` prints
    assert described["labels"] == [] and described["splits"]["dev"]["target"]["mean"] == pytest.approx(means[1],
                                                                                                         abs=1e-4)
    assert float(described["examples"][1]["label"]) == pytest.approx(task.splits["train"][1]["label"], rel=1e-5)


def _write(path: Path, labels: list[object]) -> Path:
    texts = [f"{s} {i}" for i in range(len(labels) // 10 + 1) for s in POSITIVE + NEGATIVE][:len(labels)]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(zip(texts, labels, strict=True))
    return path


def test_a_label_column_with_fractions_is_a_regression(tmp_path):
    task = load_task(_write(tmp_path / "scores.csv", [round(0.1 * (i % 37) - 1.5, 2) for i in range(60)]))
    assert task.regression and task.num_labels == 1
    assert "the targets of a regression" in task.label_source
    assert not load_task(_write(tmp_path / "classes.csv", [i % 3 for i in range(60)])).regression


def test_task_regression_reads_whole_numbers_as_targets_and_the_wrong_task_is_one_sentence(tmp_path):
    stars = _write(tmp_path / "stars.csv", [1 + i % 5 for i in range(60)])
    assert not load_task(stars).regression                                  # whole numbers are classes by default
    task = load_task(stars, task="regression")
    assert task.regression and sorted(set(task.splits["train"]["label"])) == [1.0, 2.0, 3.0, 4.0, 5.0]
    fractions = _write(tmp_path / "fractions.csv", [0.5 * (i % 7) for i in range(60)])
    refusals = [(lambda: load_task(fractions, task="classification"), "holds fractions, which are not classes"),
                (lambda: load_task(_write(tmp_path / "words.csv", ["pos", "neg"] * 30), task="regression"),
                 "--task regression needs numbers in label column 'label'"),
                (lambda: load_task("mr", task="regression"), "--task applies to files and hub datasets"),
                (lambda: load_task(stars, task="ranking"), "unknown --task 'ranking'")]
    for load, expected in refusals:
        with pytest.raises(CompressError, match=expected) as error:
            load()
        assert "\n" not in str(error.value)


@pytest.mark.parametrize(("labels", "expected"), [
    (["0.5", "pos"] * 30, "holds both numbers ('0.5') and words ('pos')"),
    ([0.5] * 60, "is the same number on every training row"),
])
def test_bad_regression_labels_are_refused_in_one_sentence(tmp_path, labels, expected):
    with pytest.raises(CompressError, match=expected.replace("(", r"\(").replace(")", r"\)")) as error:
        load_task(_write(tmp_path / "bad.csv", labels))
    assert "\n" not in str(error.value)


def test_the_logits_losses_of_a_one_output_head_are_the_mean_squared_error():
    student, teacher, gold = torch.randn(8, 1), torch.randn(8, 1), torch.randn(8)
    mse = torch.mean((student[:, 0] - teacher[:, 0]) ** 2)
    assert kd_kl(student, teacher, temperature=4.0, scale_by_t2=True) == pytest.approx(float(mse))
    assert soft_ce(student, teacher, temperature=2.0) == pytest.approx(float(mse))
    assert hard_ce(student, gold) == pytest.approx(float(torch.mean((student[:, 0] - gold) ** 2)))


def test_a_regression_evaluation_has_its_correlations_and_no_accuracy():
    gold = torch.randn(50)
    metrics = metrics_of((gold + 0.1 * torch.randn(50))[:, None], gold)
    assert metrics.accuracy is None and metrics.pearson > 0.9 and metrics.spearman > 0.9
    assert metrics_of(gold[:, None] + 0.5, gold).loss == pytest.approx(0.25)     # the mean squared error
    assert set(metrics.scores()) == {"pearson", "spearman"}


# The tiny teacher learns these 58 training sentences' scores by its 6th epoch at this rate (dev Pearson 0.96; at
# 3e-3 it never leaves the constant answer, at 3e-4 it has not left it by the 8th epoch).
FAST = ("--epochs", "2", "--batch-size", "16", "--teacher-epochs", "8", "--teacher-lr", "1e-3",
        "--teacher-layer-decay", "1", "--teacher-batch-size", "16", "--threads", "1", "--repeats", "3")


@pytest.fixture(scope="module")
def regression_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("regression")
    rng = np.random.default_rng(0)
    rows = [(f"{s} {i}", round(float(1.5 + rng.normal(0, 0.3)), 3)) for i in range(6) for s in POSITIVE]
    rows += [(f"{s} {i}", round(float(-1.5 + rng.normal(0, 0.3)), 3)) for i in range(6) for s in NEGATIVE]
    path = root / "scores.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        writer.writerows(rows)
    return {"root": root, "csv": path, "teacher": make_tiny_teacher(root / "teacher", layers=4, hidden=312)}


def test_a_regression_compared_end_to_end_on_its_own_metric(regression_data):
    root, out = regression_data["root"], regression_data["root"] / "cmp"
    done = run_cli("compare", "--teacher", str(regression_data["teacher"]), "--dataset", str(regression_data["csv"]),
                   "--methods", "distilbert,albert,prune,int8", "--metric", "spearman", "--out", str(out), *FAST,
                   "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["metric"] == "spearman"
    teacher = comparison["teacher"]
    assert set(teacher["scores"]) == {"spearman", "pearson"} and teacher["accuracy"] == teacher["scores"]["spearman"]
    assert teacher["scores"]["pearson"] > 0.5         # the teacher learned the scores, not a constant
    for method in comparison["methods"]:
        assert method["retention"] == pytest.approx(method["accuracy"] / teacher["accuracy"], rel=1e-6)
        interval = method["retention_interval"]
        assert interval["low"] <= method["retention"] <= interval["high"]
    distilbert = next(m for m in comparison["methods"] if m["method"] == "distilbert")
    record = json.loads((Path(distilbert["run_dir"]) / "metrics.json").read_text())
    assert record["student"].get("accuracy") is None
    assert set(record["student"]["scores"]) == {"pearson", "spearman"}
    assert record["metric"] == "spearman"             # the run's own retention is of the metric asked for
    assert record["retention"] == pytest.approx(record["student"]["scores"]["spearman"]
                                                / record["teacher"]["scores"]["spearman"])
    assert "**Retention** (student Spearman / teacher Spearman)" in \
        (Path(distilbert["run_dir"]) / "report.md").read_text()
    report = (out / "comparison.md").read_text()
    assert "Spearman (×100)" in report and "accuracy (%)" not in report
    assert "Pearson" in report                         # shown beside the chosen metric


def test_a_metric_that_does_not_fit_the_task_is_refused_before_work(regression_data):
    out = regression_data["root"] / "refused"
    done = run_cli("compare", "--teacher", str(regression_data["teacher"]), "--dataset", str(regression_data["csv"]),
                   "--methods", "int8", "--metric", "mcc", "--out", str(out))
    assert_refused_before_work(done, "--metric mcc does not score a regression task", out)


def test_the_mean_across_tasks_adds_independent_variances():
    from compress.reports.across_tasks import mean_interval

    mean = mean_interval([{"estimate": 0.8, "low": 0.74, "high": 0.86, "level": 0.95},
                          {"estimate": 0.6, "low": 0.52, "high": 0.64, "level": 0.95}])
    assert mean["estimate"] == pytest.approx(0.7)
    assert mean["estimate"] - mean["low"] == pytest.approx(np.hypot(0.06, 0.08) / 2)
    assert mean["high"] - mean["estimate"] == pytest.approx(np.hypot(0.06, 0.04) / 2)


def test_one_table_across_a_regression_and_a_classification(regression_data):
    from helpers import write_tiny_csv

    root, out = regression_data["root"], regression_data["root"] / "across"
    reviews = write_tiny_csv(root / "reviews.csv", copies=4)
    datasets = f"{regression_data['csv']},{reviews}"
    missing = run_cli("compare", "--teacher", str(regression_data["teacher"]), "--dataset", f"{datasets},nothing.csv",
                      "--methods", "int8", "--out", str(out))
    assert_refused_before_work(missing, "nothing.csv", out)     # every task is checked before any trains
    done = run_cli("compare", "--teacher", str(regression_data["teacher"]), "--dataset", datasets,
                   "--methods", "int8", "--out", str(out), *FAST)
    assert done.returncode == 0, done.stderr[-3000:]
    table = json.loads((out / "tasks.json").read_text())
    assert [(t["dataset"], t["metric"]) for t in table["tasks"]] == [(str(regression_data["csv"]), "pearson"),
                                                                    (str(reviews), "accuracy")]
    for task in table["tasks"]:
        own = json.loads((out / task["comparison"] / "comparison.json").read_text())
        assert own["metric"] == task["metric"]
        int8 = next(m for m in own["methods"] if m["method"] == "int8")
        row = next(r for r in table["rows"] if r["method"] == "int8")
        assert row["scores"][task["dataset"]]["estimate"] == int8["accuracy"]
        assert row["retentions"][task["dataset"]]["estimate"] == int8["retention"]
    row = next(r for r in table["rows"] if r["method"] == "int8")
    assert row["mean_score"]["estimate"] == pytest.approx(np.mean([s["estimate"] for s in row["scores"].values()]))
    text = (out / "tasks.md").read_text()
    assert "| model | scores.csv (Pearson) | reviews.csv (accuracy) | mean |" in text
    assert "across 2 tasks" in done.stdout
    from compress.reports.results_page import render_results

    kept = root / "results"
    kept.mkdir()
    (kept / "tasks.json").write_text((out / "tasks.json").read_text())
    page = render_results(kept)
    assert "across 2 tasks" in page and "| model | scores.csv (Pearson) | reviews.csv (accuracy) | mean |" in page
    assert "](tasks/" not in page                  # no link to a comparison that is not beside the page


def test_compare_passes_its_column_and_task_options_to_the_data(regression_data):
    out = regression_data["root"] / "named"
    done = run_cli("compare", "--dataset", "mr", "--task", "regression", "--methods", "int8", "--out", str(out))
    assert_refused_before_work(done, "--task applies to files and hub datasets, not to the named dataset 'mr'", out)


def test_a_search_on_a_regression_selects_on_its_metric_with_the_columns_given(regression_data, tmp_path):
    renamed = tmp_path / "renamed.csv"
    with open(regression_data["csv"], newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))[1:]
    with open(renamed, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["sentence", "score"], *rows])
    space = tmp_path / "space.toml"
    space.write_text('[int8]\nbackend = "onnxruntime"\n')   # a candidate that trains nothing: the test is the bar
    out = tmp_path / "search"
    done = run_cli("search", "--teacher", str(regression_data["teacher"]), "--dataset", str(renamed),
                   "--text-column", "sentence", "--label-column", "score", "--metric", "spearman",
                   "--minimize", "size", "--space", str(space), "--seeds", "1", "--against", "none",
                   "--finalists", "1", "--budget", "20m", "--seq-len", "32", "--out", str(out),
                   *[a for a in FAST if a not in ("--epochs", "2")])
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((out / "search.json").read_text())
    assert record["metric"] == "spearman" and record["status"] == "complete"
    assert record["teacher_held_out_accuracy"] > 0.5   # the teacher's Spearman on the held-out sentences: it learned
    assert record["bar"] == pytest.approx(0.97 * record["teacher_held_out_accuracy"])
    assert "resolve a retention of the teacher's Spearman near 97%" in done.stderr and 0 < record["resolution"] < 1
    comparison = json.loads((out / "comparison.json").read_text())
    assert comparison["metric"] == "spearman"         # the finals are judged on the same metric
    for row in comparison["methods"]:                 # every finalist read the columns asked for
        run = json.loads((Path(row["run_dir"]) / "config.json").read_text())["run"]
        assert (run["text_column"], run["label_column"], run["metric"]) == ("sentence", "score", "spearman")
    markdown = (out / "search.md").read_text()
    assert "| test Spearman |" in markdown
    assert re.search(r"every test sentence: Spearman -?\d\.\d{3} \(", markdown)   # a correlation, not a percentage
