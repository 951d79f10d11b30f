"""A lost Ray worker costs a retry, not the comparison: on a real two-node cluster (tests/conftest.py ``ray_cluster``),
the worker training a student is killed (SIGKILL) once its first checkpoint is written; the task is started again,
continues from that checkpoint and ends as the same run never killed. A refusal inside a task is not retried; once the
retries are spent the error is one sentence, and the other runs still finish."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import HANG_GUARD, REPO, cluster_processes, make_tiny_teacher, run_cli, wait_for, write_tiny_csv

from compress.errors import CompressError
from compress.runs.compare import run_dir_of
from compress.runs.executors import DEFAULT_MAX_RETRIES, Executor

pytestmark = pytest.mark.minutes(5)   # on one CI worker: see tests/conftest.py

# A 2-layer teacher of 32 (its distilbert student: 1 layer), 360 sentences: a student's epoch is long enough to kill its
# worker in, and the whole run quick. The fast recipe: the training sentences only, each method's own epochs (a
# comparison's: --epochs).
FAST = ["--teacher-epochs", "8", "--teacher-lr", "3e-3", "--teacher-batch-size", "8", "--batch-size", "8",
        "--recipe", "fast", "--threads", "1", "--repeats", "3", "--seq-len", "64"]
ROW = ("params", "size_bytes", "accuracy", "macro_f1", "retention", "steps")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray-retries")
    teacher = make_tiny_teacher(root / "teacher", layers=2, hidden=32)
    csv = write_tiny_csv(root / "reviews.csv", copies=30)
    args = ["--teacher", str(teacher), "--dataset", str(csv), *FAST]
    return {"root": root, "args": args, "compare": ["compare", *args, "--epochs", "3"]}


def _cache(tmp_path: Path, name: str = "cache") -> dict[str, str]:
    """An environment with a cache of its own (the run store would otherwise hand a comparison another's runs)."""
    return {"COMPRESS_CACHE": str(tmp_path / name), "OMP_NUM_THREADS": "1"}


def _worker_writing(run_dir: Path, cluster) -> int | None:
    """The cluster's process writing the run ``run_dir`` (its log open in the run's temporary directory), if any."""
    prefix = str(run_dir.parent / f".{run_dir.name}.tmp-")
    for pid in cluster_processes(cluster.token, cluster.root):
        try:
            if any(os.readlink(fd).startswith(prefix) for fd in Path(f"/proc/{pid}/fd").iterdir()):
                return pid
        except OSError:   # ended meanwhile
            continue
    return None


def _checkpoints(env: dict[str, str]) -> list[Path]:
    return list(Path(env["COMPRESS_CACHE"], "unfinished").glob("*/state.pt"))


def _kill_after_first_checkpoint(args: list[str], env: dict[str, str], run_dir: Path, cluster,
                                 logs: Path) -> tuple[subprocess.Popen, int]:
    """Start ``compress ARGS``; once a worker of the cluster trains ``run_dir`` and its first checkpoint is written,
    kill that worker (SIGKILL). The command's stdout and stderr go to files in ``logs`` (a pipe left unread while
    the test waits could fill and stop it)."""
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "stdout", "w") as stdout, open(logs / "stderr", "w") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "compress", *args], cwd=REPO, stdout=stdout, stderr=stderr,
                                   env={**os.environ, "COLUMNS": "200", **env}, text=True)
    try:
        found: list[int] = []

        def writing() -> bool:
            found[:] = [pid] if (pid := _worker_writing(run_dir, cluster)) else []
            return bool(found)

        # The teacher is fine-tuned (and its own checkpoints removed) before any task starts: once a worker writes the
        # run, the checkpoints in the cache are the run's.
        wait_for(writing, process, f"a Ray worker training {run_dir.name}", poll=0.05)
        assert found, (logs / "stderr").read_text()[-3000:]
        wait_for(lambda: _checkpoints(env), process, f"the first checkpoint of {run_dir.name}")
        assert _checkpoints(env), (logs / "stderr").read_text()[-3000:]
        os.kill(found[0], signal.SIGKILL)
        process.wait(timeout=HANG_GUARD)
    finally:
        process.kill()
    return process, found[0]


def _losses(run_dir: Path) -> list[tuple[int, float]]:
    lines = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in lines if "step" in r]


def test_max_retries_is_an_option_of_both_commands_and_never_negative():
    with pytest.raises(CompressError) as refused:
        Executor(kind="ray", max_retries=-1)
    message = str(refused.value)
    assert message.startswith("--max-retries must be a whole number, 0 or more") and message.count(". ") == 0
    with pytest.raises(CompressError, match="are for --executor ray"):
        Executor(kind="local", max_retries=5)
    assert Executor(kind="ray", max_retries=0).max_retries == 0 and Executor().max_retries == DEFAULT_MAX_RETRIES == 3
    for command in ("compare", "search"):
        done = run_cli(command, "--help")
        assert done.returncode == 0 and "--max-retries" in done.stdout, done.stdout


def test_a_negative_max_retries_is_one_line_before_any_work(tiny, tmp_path):
    out = tmp_path / "never"
    done = run_cli(*tiny["compare"], "--methods", "int8", "--executor", "ray", "--max-retries", "-1",
                   "--out", str(out), env=_cache(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--max-retries must be" in done.stderr, \
        done.stderr
    assert not out.exists()


def test_a_student_whose_worker_is_killed_is_retried_from_its_checkpoint_and_ends_as_if_never_killed(
        tiny, tmp_path, ray_cluster):
    out = tmp_path / "cmp"
    args = [*tiny["compare"], "--methods", "distilbert,int8", "--out", str(out), "--json",
            "--executor", "ray", "--address", ray_cluster.address, "--cpus-per-run", "1"]
    env = _cache(tmp_path)
    student = run_dir_of(out, "distilbert", 13)
    process, _ = _kill_after_first_checkpoint(args, env, student, ray_cluster, tmp_path / "logs")
    stderr = (tmp_path / "logs" / "stderr").read_text()
    assert process.returncode == 0, stderr[-3000:]
    assert f"ray: distilbert@13 lost its worker and was retried (attempt 2 of {DEFAULT_MAX_RETRIES + 1})" in stderr
    assert "int8@13 lost its worker" not in stderr and "finished int8@13 (ray)" in stderr
    # the retry continued from the checkpoint the killed worker wrote (the task's own line, forwarded by Ray)
    assert re.search(r"resuming the run \S*distilbert from its checkpoint at the end of epoch 1", stderr), stderr
    assert not _checkpoints(env)   # and the finished run left none behind
    rows = {m["method"]: m for m in json.loads((tmp_path / "logs" / "stdout").read_text())["methods"]}
    assert set(rows) == {"distilbert", "int8"}
    # The same student made here, never killed, with the same seed: the same losses, step by step, and the same row.
    reference = tmp_path / "reference"
    here = [*args[:args.index("--out")], "--out", str(reference), "--json"]
    done = run_cli(*[a if a != "distilbert,int8" else "distilbert" for a in here], env=_cache(tmp_path, "here"))
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout)["methods"][0]
    assert {k: rows["distilbert"][k] for k in ROW} == {k: theirs[k] for k in ROW}
    assert _losses(student) == _losses(run_dir_of(reference, "distilbert", 13))


def test_a_refusal_inside_a_task_is_not_retried_and_the_other_runs_finish(tiny, tmp_path, ray_cluster):
    """A transfer-text table without a text column passes the checks before any work (the file is there, UTF-8,
    not empty) and is refused where the student reads it, inside its task: once, exit 2, no retry."""
    texts = tmp_path / "texts.csv"
    texts.write_text("words\nnot the column a text is read from\n")
    out = tmp_path / "cmp"
    done = run_cli(*tiny["compare"], "--methods", "distilbert,int8", "--transfer-text", str(texts),
                   "--out", str(out), "--executor", "ray", "--address", ray_cluster.address, "--cpus-per-run", "1",
                   env=_cache(tmp_path))
    assert done.returncode == 2, done.stderr[-3000:]
    error = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "has no text column" in error[0], done.stderr[-3000:]
    assert "retried" not in done.stderr
    assert "finished int8@13 (ray)" in done.stderr and (run_dir_of(out, "int8", 13) / "metrics.json").is_file()


def test_once_the_retries_are_spent_the_error_is_one_sentence_and_the_run_continues_when_run_again(
        tiny, tmp_path, ray_cluster):
    """--max-retries 0: the killed student's run fails in one sentence naming it (exit 1), the other run finishes;
    the same command again reuses that run and continues the student from its checkpoint."""
    out = tmp_path / "cmp"
    args = [*tiny["compare"], "--methods", "distilbert,distilbert+int8,int8", "--out", str(out),
            "--executor", "ray", "--address", ray_cluster.address, "--cpus-per-run", "1"]
    env = _cache(tmp_path)
    student = run_dir_of(out, "distilbert", 13)
    process, _ = _kill_after_first_checkpoint([*args, "--max-retries", "0"], env, student, ray_cluster,
                                              tmp_path / "logs")
    stderr = (tmp_path / "logs" / "stderr").read_text()
    assert process.returncode == 1, stderr[-3000:]
    error = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and error[0].startswith("error: the run distilbert@13 lost its Ray worker or node 1 time ("),\
        stderr[-3000:]
    assert "run the command again to continue" in error[0]
    assert "ray: distilbert+int8@13 was not run: its parent distilbert@13 failed" in stderr
    assert "finished int8@13 (ray)" in stderr and (run_dir_of(out, "int8", 13) / "metrics.json").is_file()
    assert len(_checkpoints(env)) == 1 and not student.exists()
    again = run_cli(*args, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert re.search(r"resuming the run \S*distilbert from its checkpoint", again.stderr), again.stderr[-3000:]
    assert "reused 1 finished run(s)" in again.stderr and "retried" not in again.stderr


SPACE = "[distilbert]\n"


def test_a_search_candidate_whose_worker_is_killed_is_retried_and_the_search_completes(tiny, tmp_path, ray_cluster):
    space = tmp_path / "space.toml"
    space.write_text(SPACE)
    out = tmp_path / "search"
    args = ["search", *tiny["args"], "--space", str(space), "--seeds", "2", "--against", "none", "--finalists", "1",
            "--budget", "20m", "--out", str(out), "--executor", "ray", "--address", ray_cluster.address,
            "--cpus-per-run", "1"]
    env = _cache(tmp_path)
    process, _ = _kill_after_first_checkpoint(args, env, run_dir_of(out, "distilbert", 13), ray_cluster,
                                              tmp_path / "logs")
    stderr = (tmp_path / "logs" / "stderr").read_text()
    assert process.returncode == 0, stderr[-3000:]
    assert f"ray: distilbert@13 lost its worker and was retried (attempt 2 of {DEFAULT_MAX_RETRIES + 1})" in stderr
    assert re.search(r"resuming the run \S*distilbert from its checkpoint", stderr), stderr[-3000:]
    record = json.loads((out / "search.json").read_text())
    assert record["status"] == "complete" and record["chosen"] == "distilbert"
    assert "finished distilbert@14 (ray)" in stderr
