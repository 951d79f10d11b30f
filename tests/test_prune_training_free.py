"""`compress run prune --recovery-epochs 0` (training-free) writes a run, and the recorded recipe lists
exactly the recovery stages a run trained (none, or one per pruning step), so the report can describe them."""

from __future__ import annotations

import json

import pytest
from helpers import make_tiny_teacher, run_cli, write_tiny_csv

TEACHER_FLAGS = ("--teacher-epochs", "2", "--teacher-batch-size", "16", "--teacher-lr", "3e-3")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("prune-free")
    return {"root": root, "teacher": make_tiny_teacher(root / "teacher"), "csv": write_tiny_csv(root / "r.csv"),
            "env": {"COMPRESS_CACHE": str(root / "cache")}}


def _prune(tiny, out: str, *args: str):
    return run_cli("run", "prune", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]), *TEACHER_FLAGS,
                   "--threads", "1", "--no-head-curve", "--scoring-examples", "32", "--out", str(tiny["root"] / out),
                   *args, env=tiny["env"])


def test_training_free_pruning_writes_a_complete_run(tiny):
    done = _prune(tiny, "free", "--recovery-epochs", "0")
    assert done.returncode == 0, done.stderr
    out = tiny["root"] / "free"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["method"] == "prune" and metrics["stages"] == []
    assert json.loads((out / "config.json").read_text())["recipe"]["stages"] == []
    assert not (out / "log.jsonl").read_text().strip()          # nothing trained, nothing logged
    report = (out / "report.md").read_text()
    assert "no recovery was trained" in report and "## Training" not in report
    assert metrics["student"]["params"] < metrics["teacher"]["params"]


def test_each_pruning_step_has_its_recovery_stage_in_the_recipe_and_report(tiny):
    done = _prune(tiny, "two-steps", "--steps", "2", "--recovery-epochs", "1", "--batch-size", "16")
    assert done.returncode == 0, done.stderr
    out = tiny["root"] / "two-steps"
    stages = json.loads((out / "metrics.json").read_text())["stages"]
    recipe = json.loads((out / "config.json").read_text())["recipe"]["stages"]
    assert [s["stage"] for s in stages] == [s["name"] for s in recipe] == ["recover 1/2", "recover 2/2"]
    report = (out / "report.md").read_text()
    assert "**recover 1/2**" in report and "**recover 2/2**" in report
