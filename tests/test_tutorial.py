"""docs/tutorial.md's commands run as written, in order, on a tiny configuration.

Every line of a ```console block that starts with ``$ `` is a command. The test runs them one after
another in a scratch directory. Where a command trains or measures, the same flags a user would
add for a quick try are appended: a small teacher (4 layers of 312, so every default student fits)
saved in a folder called ``minilm`` and a tiny CSV called ``mr.csv``, which also keeps the paths the
tutorial names (``runs/compare-minilm-mr``) valid. Commands that only read (``teachers``,
``teachers verify minilm``, ``explain``) run on the real bundled teacher.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest
from helpers import HANG_GUARD, REPO, make_tiny_teacher, run_cli, write_tiny_csv

from compress.registry import get_method
from compress.registry.pipeline import parse

pytestmark = pytest.mark.minutes(10)   # on one CI worker: see tests/conftest.py

TUTORIAL = REPO / "docs" / "tutorial.md"
TEACHER_FLAGS = ("--teacher-epochs", "4", "--teacher-lr", "3e-3", "--teacher-batch-size", "16")
FINETUNE_FLAGS = ("--epochs", "4", "--lr", "3e-3", "--batch-size", "16")   # the same fine-tuning as above
BATCH_FLAGS = ("--batch-size", "16")
STUDENT_FLAGS = ("--epochs", "1", *BATCH_FLAGS)
SPEED_FLAGS = ("--threads", "1")


def tutorial_commands() -> list[list[str]]:
    commands, in_console = [], False
    for line in TUTORIAL.read_text().splitlines():
        if line.startswith("```"):
            in_console = line.strip() == "```console"
        elif in_console and line.startswith("$ "):
            commands.append(shlex.split(line[2:]))
    return commands


def tiny_flags(argv: list[str], teacher: str, csv: str, corpus: str) -> list[str]:
    """The flags that make one tutorial command small; read-only commands get none."""
    data = ["--teacher", teacher, "--dataset", csv]
    if argv[:2] == ["compress", "pretrain"]:   # the tiny teacher's own width, one short epoch on a tiny corpus
        return ["--teacher", teacher, "--corpus", corpus, "--embedding-size", "312", "--sentences-per-segment", "1",
                "--epochs", "1", "--precision", "fp32"]
    if argv[:2] in (["compress", "teacher"], ["compress", "teachers"]) and "finetune" in argv:
        return data + list(FINETUNE_FLAGS)
    if argv[:2] == ["compress", "run"]:   # a method or a pipeline, with options in brackets; the comparison's
        # batches too, so that it reuses these runs as it would a user's (the run store)
        transforms = all(get_method(step.name).kind == "transform" for step in parse(argv[2]).steps)
        return data + list(TEACHER_FLAGS) + list(SPEED_FLAGS) + list(BATCH_FLAGS if transforms else STUDENT_FLAGS)
    if argv[:2] == ["compress", "compare"]:   # two seeds where it asks for three: intervals over seeds all the same
        seeds = ["--seeds", "13,14"] if "--seeds" in argv else []
        return data + list(TEACHER_FLAGS) + list(STUDENT_FLAGS) + list(SPEED_FLAGS) + ["--repeats", "3"] + seeds
    if argv[:2] == ["python", "benchmarks/quantization.py"]:
        return ["--teacher", teacher, "--dataset", csv, "--threads", "1", "--warmup", "2", "--passes", "1",
                "--seq-len", "16", "--batch-size", "8"]
    return []


def test_tutorial_has_the_commands_it_promises():
    commands = [" ".join(c[:3]) for c in tutorial_commands()]
    for expected in ("compress teacher finetune", "compress run albert", "compress run distilbert",
                     "compress run tinybert", "compress run int8", "compress compare", "compress report"):
        assert any(c.startswith(expected) for c in commands), expected


def test_tutorial_commands_run_as_written(tmp_path):
    teacher = make_tiny_teacher(tmp_path / "minilm", layers=4, hidden=312)
    csv = write_tiny_csv(tmp_path / "mr.csv", copies=4)
    corpus = tmp_path / "corpus.txt"   # documents of five sentences, separated by blank lines
    corpus.write_text("\n\n".join(f"Story {i} began. It went on. Then it turned. It ended well. That was {i}."
                                  for i in range(40)) + "\n")
    work = tmp_path / "work"
    work.mkdir()
    env = {"COMPRESS_CACHE": str(tmp_path / "cache")}
    reused = None
    for argv in tutorial_commands():
        argv = [*argv, *tiny_flags(argv, str(teacher), str(csv), str(corpus))]
        if argv[0] == "compress":
            done = run_cli(*argv[1:], env=env, cwd=work)
        elif argv[0] == "python":
            script = [sys.executable, str(REPO / argv[1]), *argv[2:]]
            done = subprocess.run(script, capture_output=True, text=True, cwd=work, timeout=HANG_GUARD,
                                  env={**os.environ, **env})
        else:
            pytest.fail(f"the tutorial runs {argv[0]!r}; only compress and python commands are checked")
        assert done.returncode == 0, f"{shlex.join(argv)}\n{done.stderr[-2000:]}"
        if argv[:2] == ["compress", "compare"] and reused is None:
            reused = json.loads((work / "runs" / "compare-minilm-mr" / "comparison.json").read_text())["reused"]
    # Section 11: the first comparison reuses the runs sections 5-10 made (the run store) instead of making them again.
    assert {f"{name}@13" for name in ("albert", "distilbert", "distilbert+int8", "tinybert", "int8", "prune",
                                      "prune-vocab", "lowrank")} <= set(reused)
    # What the tutorial says these commands leave behind.
    assert (work / "runs" / "distilbert-int8" / "metrics.json").is_file()
    assert (work / "runs" / "compare-minilm-mr" / "comparison.html").is_file()
