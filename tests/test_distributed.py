"""Data-parallel training: the real CLI under a real `torchrun` with two processes (gloo on the CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import HANG_GUARD, REPO, make_tiny_teacher, run_cli, write_tiny_csv
from safetensors.torch import load_file

import compress.distributed as distributed


def _args(root: Path, out: Path) -> list[str]:
    return ["run", "distilbert", "--teacher", str(root / "teacher"), "--dataset", str(root / "reviews.csv"),
            "--epochs", "3", "--batch-size", "8", "--lr", "1e-3", "--teacher-epochs", "4", "--teacher-lr", "3e-3",
            "--teacher-batch-size", "8", "--threads", "1", "--out", str(out)]


def test_torchrun_with_two_processes_trains_one_run_as_well_as_one_process(tmp_path):
    make_tiny_teacher(tmp_path / "teacher")
    write_tiny_csv(tmp_path / "reviews.csv", copies=30)
    single = run_cli(*_args(tmp_path, tmp_path / "single"), env={"COMPRESS_CACHE": str(tmp_path / "cache-1")})
    assert single.returncode == 0, single.stderr

    runs = tmp_path / "runs"
    runs.mkdir()
    done = _torchrun("-m", "compress", *_args(tmp_path, runs / "dp"), env={"COMPRESS_CACHE": str(tmp_path / "cache-2")})
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in runs.iterdir()) == ["dp"]   # one run directory, nothing beside it
    config = json.loads((runs / "dp" / "config.json").read_text())
    assert config["processes"] == 2
    assert done.stdout.count("run directory:") == 1           # rank 0 reports, rank 1 stays quiet
    teachers = list((tmp_path / "cache-2" / "teachers").iterdir())
    assert len(teachers) == 1                                 # the teacher was fine-tuned (and cached) once
    assert json.loads((teachers[0] / "record.json").read_text())["test"]["examples"] == \
        json.loads((runs / "dp" / "metrics.json").read_text())["dataset"]["sizes"]["test"]  # each example once

    ours = json.loads((runs / "dp" / "metrics.json").read_text())
    theirs = json.loads((tmp_path / "single" / "metrics.json").read_text())
    assert abs(ours["student"]["accuracy"] - theirs["student"]["accuracy"]) <= 0.01
    assert abs(ours["teacher"]["accuracy"] - theirs["teacher"]["accuracy"]) <= 0.01


def _torchrun(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    torchrun = Path(sys.executable).parent / "torchrun"
    return subprocess.run([str(torchrun), "--standalone", "--nproc_per_node=2", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=HANG_GUARD, env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200",
                                                       **(env or {})})


def test_two_processes_take_the_same_steps_as_one_when_nothing_random_differs(tmp_path):
    """Without dropout, splitting each global batch over two ranks and averaging their gradients is the same
    arithmetic as the whole batch in one process (up to float summation order): the same loss at every step,
    the same final weights, the same gathered dev metrics (the last batch of 5 splits 3 + 2)."""
    worker = REPO / "tests" / "workers" / "train_tiny.py"
    alone = subprocess.run([sys.executable, str(worker), str(tmp_path / "one.json")], capture_output=True, text=True,
                           timeout=HANG_GUARD)
    assert alone.returncode == 0, alone.stderr
    two = _torchrun(str(worker), str(tmp_path / "two.json"))
    assert two.returncode == 0, two.stderr[-3000:]
    one, both = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two"))
    assert (one["world"], both["world"]) == (1, 2)
    assert len(one["losses"]) == len(both["losses"]) == 8
    assert max(abs(a - b) for a, b in zip(one["losses"], both["losses"])) < 1e-5
    # Every weight tensor, element by element (not a checksum, which differences of opposite sign could cancel).
    alone_weights, two_weights = (load_file(str(tmp_path / f"{n}.json.safetensors")) for n in ("one", "two"))
    assert alone_weights.keys() == two_weights.keys()
    diffs = {name: float((alone_weights[name] - two_weights[name]).abs().max()) for name in alone_weights}
    assert max(diffs.values()) < 1e-5, sorted(diffs.items(), key=lambda kv: -kv[1])[:3]
    assert one["dev"] == pytest.approx(both["dev"], abs=1e-6) and both["dev"]["examples"] == 29


def test_one_process_is_a_world_of_one():
    if distributed.launched():
        pytest.skip("the tests themselves run under a launcher")
    assert distributed.world() == distributed.World(rank=0, size=1, local_rank=0)
