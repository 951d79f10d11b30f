"""Results a user can trust: exit codes and one-line messages, signals, safe --overwrite, locks.

The CLI is driven as a user drives it (a subprocess, real signals, real files); the locking and
directory-replacement primitives are checked with real concurrent processes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import HANG_GUARD, REPO, make_tiny_teacher, run_cli, wait_for, write_tiny_csv

from compress.errors import CompressError
from compress.paths import atomic_dir, locked


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture
def cli(monkeypatch, capsys):
    """The real console entry point, called in this process (no interpreter start-up per call): returns
    (exit code, stderr). The signal handlers it installs are put back afterwards."""
    from compress.cli import app as app_module

    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def call(*args: str, cwd: Path | None = None) -> tuple[int, str]:
        monkeypatch.setattr(sys, "argv", ["compress", *args])
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capsys.readouterr()
        try:
            app_module.main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        finally:
            for signum, handler in saved.items():
                signal.signal(signum, handler)
        return code, capsys.readouterr().err

    return call


def _leftovers(parent: Path, name: str) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))


# --- usage errors and values that cannot be right ---------------------------------------------------

@pytest.mark.parametrize(("args", "named"), [
    (("run", "albert", "--seed", "abc"), "'--seed'"),
    (("run", "albert", "--no-such-flag"), "--no-such-flag"),
    (("run",), "'method'"),
    (("run", "albert", "--lr", "0"), "--lr"),
    (("run", "albert", "--patience", "0"), "--patience"),
    (("run", "albert", "--teacher-lr", "-1"), "lr"),
    (("run", "prune", "--keep-heads", "0"), "--keep-heads"),
    (("run", "prune", "--keep-ffn", "1.5"), "--keep-ffn"),
    (("run", "prune", "--drop-layers", "6"), "--drop-layers"),     # minilm has 6 layers
    (("run", "distilbert+prune[drop_layers=3]"), "the model has 3"),  # its DistilBERT student 3, before training
    (("run", "int8", "--keep-heads", "0.5"), "--keep-heads"),      # a method that does not prune
    (("run", "albert", "--keep-ffn", "0.5"), "--keep-ffn"),
    (("run", "prune-vocab", "--vocab-from", "everything"), "--vocab-from"),
])
def test_a_usage_error_is_one_line_naming_the_option_with_exit_2(args, named, tmp_path, monkeypatch, cli):
    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path / "cache"))
    code, stderr = cli(*args)
    assert code == 2, stderr
    line = _one_line(stderr)
    assert line.startswith("error:") and named in line
    assert not (tmp_path / "cache" / "teachers").exists()  # refused before any work


def test_the_console_script_itself_exits_2_on_a_usage_error(tmp_path):
    done = run_cli("run", "albert", "--seed", "abc", env={"COMPRESS_CACHE": str(tmp_path / "cache")})
    assert done.returncode == 2 and "'--seed'" in _one_line(done.stderr)


@pytest.mark.parametrize("values", [{"lr": -1.0}, {"lr": 0.0}, {"epochs": 0}, {"patience": 0}, {"batch_size": -2},
                                    {"threads": 0}])
def test_a_value_that_cannot_be_right_is_refused_not_replaced(values):
    from compress.runs.config import RunConfig

    with pytest.raises(CompressError, match="must be (a )?positive"):
        RunConfig(method="albert", **values)


def test_a_failed_teachers_verify_exits_1(monkeypatch, tmp_path, capsys):
    from compress.cli import app as app_module
    from compress.cli import teachers as teachers_module

    teacher = make_tiny_teacher(tmp_path / "teacher")
    monkeypatch.setattr(teachers_module, "PARITY_TOLERANCE", -1.0)  # no difference passes: a mismatch
    monkeypatch.setattr(sys, "argv", ["compress", "teachers", "verify", str(teacher)])
    with pytest.raises(SystemExit) as ended:
        app_module.main()
    assert ended.value.code == 1
    assert "MISMATCH" in capsys.readouterr().out


# --- bad teacher directories and bad --out paths: one line naming the file, before any training -------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("safety")
    teacher = make_tiny_teacher(root / "teacher")
    csv = write_tiny_csv(root / "reviews.csv")
    env = {"COMPRESS_CACHE": str(root / "cache")}
    done = run_cli("teacher", "finetune", "--teacher", str(teacher), "--dataset", str(csv), "--epochs", "2",
                   "--batch-size", "16", "--lr", "3e-3", env=env)
    assert done.returncode == 0, done.stderr
    return {"root": root, "teacher": teacher, "csv": csv, "env": env}


TEACHER_FLAGS = ("--teacher-epochs", "2", "--teacher-batch-size", "16", "--teacher-lr", "3e-3")


def _run(tiny, *args: str, method: str = "int8", **kwargs) -> subprocess.CompletedProcess:
    return run_cli("run", method, "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]), *TEACHER_FLAGS,
                   *args, env=tiny["env"], **kwargs)


def _run_here(cli, tiny, *args: str, cwd: Path | None = None) -> tuple[int, str]:
    return cli("run", "int8", "--teacher", str(tiny["teacher"]), "--dataset", str(tiny["csv"]), *TEACHER_FLAGS,
               *args, cwd=cwd)


def _copy_teacher(tiny, name: str) -> Path:
    import shutil

    return Path(shutil.copytree(tiny["teacher"], tiny["root"] / name))


@pytest.fixture
def tiny_env(tiny, monkeypatch):
    monkeypatch.setenv("COMPRESS_CACHE", tiny["env"]["COMPRESS_CACHE"])
    return tiny


def test_a_garbage_config_json_is_one_line_naming_it(tiny_env, cli):
    teacher = _copy_teacher(tiny_env, "garbage-config")
    (teacher / "config.json").write_text("{ this is not json")
    code, stderr = cli("run", "albert", "--teacher", str(teacher), "--dataset", str(tiny_env["csv"]))
    assert code == 2
    assert str(teacher / "config.json") in _one_line(stderr)


def test_truncated_weights_are_one_line_naming_the_file(tiny_env, cli):
    tiny = tiny_env
    teacher = _copy_teacher(tiny, "truncated")
    weights = teacher / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    before = set((Path(tiny["env"]["COMPRESS_CACHE"]) / "teachers").iterdir())
    code, stderr = cli("run", "distilbert", "--teacher", str(teacher), "--dataset", str(tiny["csv"]))
    assert code == 2
    line = _one_line(stderr)
    assert str(weights) in line and "damaged or incomplete" in line
    assert set((Path(tiny["env"]["COMPRESS_CACHE"]) / "teachers").iterdir()) == before  # nothing was trained


def test_an_out_that_is_a_file_or_under_a_file_is_one_line(tiny_env, cli):
    tiny = tiny_env
    a_file = tiny["root"] / "a-file.txt"
    a_file.write_text("keep me")
    for out in (a_file, a_file / "run"):
        code, stderr = _run_here(cli, tiny, "--out", str(out))
        assert code == 2
        assert "is a file" in _one_line(stderr)
    assert a_file.read_text() == "keep me"


# --- --overwrite replaces only runs ------------------------------------------------------------------

def test_overwrite_refuses_a_directory_that_is_not_a_run(tiny_env, cli):
    tiny = tiny_env
    precious = tiny["root"] / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    code, stderr = _run_here(cli, tiny, "--out", str(precious), "--overwrite")
    assert code == 2
    assert "replaces only a compress run directory" in _one_line(stderr)
    assert (precious / "thesis.tex").read_text() == "years of work"


def test_overwrite_refuses_the_current_directory_even_when_it_holds_a_run(tiny_env, cli):
    tiny = tiny_env
    here = tiny["root"] / "here"
    here.mkdir()
    (here / "metrics.json").write_text("{}")
    (here / "config.json").write_text("{}")
    (here / "notes.txt").write_text("mine")
    code, stderr = _run_here(cli, tiny, "--out", ".", "--overwrite", cwd=here)
    assert code == 2
    assert "current directory" in _one_line(stderr)
    assert (here / "notes.txt").read_text() == "mine"


def test_overwrite_replaces_a_run_and_says_so(tiny_env, cli):
    tiny = tiny_env
    out = tiny["root"] / "replaced"
    code, stderr = _run_here(cli, tiny, "--out", str(out), "--backend", "torch", "--threads", "1")
    assert code == 0, stderr
    code, stderr = _run_here(cli, tiny, "--out", str(out), "--backend", "torch", "--threads", "1")
    assert code == 2 and "--overwrite" in _one_line(stderr)
    code, stderr = _run_here(cli, tiny, "--out", str(out), "--backend", "torch", "--threads", "1", "--overwrite")
    assert code == 0, stderr
    assert "will be replaced" in stderr
    assert json.loads((out / "metrics.json").read_text())["method"] == "int8"
    assert _leftovers(out.parent, out.name) == []


# --- signals ------------------------------------------------------------------------------------------

def _start_long_run(tiny, out: Path) -> subprocess.Popen:
    args = [sys.executable, "-m", "compress", "run", "distilbert", "--teacher", str(tiny["teacher"]),
            "--dataset", str(tiny["csv"]), "--out", str(out), "--epochs", "400", "--batch-size", "8",
            "--teacher-epochs", "2", "--teacher-batch-size", "16", "--teacher-lr", "3e-3"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, **tiny["env"], "COLUMNS": "200"})
    began = wait_for(lambda: any(p.name.startswith(f".{out.name}.tmp-") for p in out.parent.iterdir()), proc,
                     "the start of training")
    assert began, proc.communicate()   # the run ended before it began training
    time.sleep(0.5)   # a little way into training (a signal sooner or later is as good: this is no deadline)
    return proc


@pytest.mark.parametrize(("signum", "code", "word"), [(signal.SIGINT, 130, "interrupted"),
                                                     (signal.SIGTERM, 143, "terminated")])
def test_a_signal_exits_with_its_code_one_line_and_no_temporary_directory(tiny, signum, code, word):
    out = tiny["root"] / f"signalled-{code}"
    proc = _start_long_run(tiny, out)
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=HANG_GUARD)
    assert proc.returncode == code
    # the run may have stored the teacher's outputs (a complete cache entry, its progress said) before the signal
    said = "\n".join(x for x in stderr.split("\r")[-1].splitlines() if not x.startswith("teacher targets ("))
    line = _one_line(said)
    kept = rf"error: {word}; kept what was complete before it \(\S+/teacher_targets/\S+\), nothing half-written\."
    assert line == f"error: {word}; nothing was written." or re.fullmatch(kept, line), line
    assert not out.exists()
    assert _leftovers(out.parent, out.name) == []


_SWALLOWED = """
import signal, sys, time
from compress import interrupts
interrupts.install()

class SignalledOnDelete:
    def __del__(self):  # the handler runs in here, where Python swallows what it raises
        signal.raise_signal(int(sys.argv[1]))

try:
    SignalledOnDelete()
    for _ in range(250):
        time.sleep(0.02)
    print("ran on")
except interrupts.Interrupted as e:
    print("interrupted", e.exit_code)
"""


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_that_python_swallows_is_raised_again(signum, code):
    # CI once sent SIGTERM while the import system ran a weakref callback: Python printed "Exception ignored"
    # and the run trained on. A __del__ swallows the same way, and deterministically.
    done = subprocess.run([sys.executable, "-c", _SWALLOWED, str(int(signum))], capture_output=True, text=True,
                          cwd=REPO, timeout=HANG_GUARD)
    assert done.stdout.strip() == f"interrupted {code}"
    assert "Exception ignored" not in done.stderr


def test_a_killed_run_leaves_a_temporary_directory_that_the_next_run_removes(tiny_env, cli):
    tiny = tiny_env
    out = tiny["root"] / "killed"
    proc = _start_long_run(tiny, out)
    proc.kill()
    proc.communicate(timeout=HANG_GUARD)
    assert [n for n in _leftovers(out.parent, out.name) if ".tmp-" in n]  # SIGKILL cannot be cleaned up after
    code, stderr = _run_here(cli, tiny, "--out", str(out), "--backend", "torch", "--threads", "1")
    assert code == 0, stderr
    assert "left beside" in stderr and "killed" in stderr
    assert _leftovers(out.parent, out.name) == []


# --- concurrency -------------------------------------------------------------------------------------

def test_two_concurrent_runs_on_one_out_never_both_succeed(tiny):
    out = tiny["root"] / "contended"
    args = [sys.executable, "-m", "compress", "run", "int8", "--backend", "torch", "--teacher", str(tiny["teacher"]),
            "--dataset", str(tiny["csv"]), "--out", str(out), "--teacher-epochs", "2", "--teacher-batch-size",
            "16", "--teacher-lr", "3e-3"]
    env = {**os.environ, **tiny["env"], "COLUMNS": "200"}
    procs = [subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
             for _ in range(2)]
    stderrs = [p.communicate(timeout=HANG_GUARD)[1] for p in procs]
    results = [(p.returncode, stderr) for p, stderr in zip(procs, stderrs)]
    assert sorted(code for code, _ in results) == [0, 2], results
    refused = next(stderr for code, stderr in results if code == 2)
    assert "is writing" in refused or "already exists" in refused
    assert (out / "metrics.json").is_file()


_HOLD = """
import sys
from compress.paths import locked
with locked(__import__("pathlib").Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.readline()   # held until told (a line, or stdin closed), or killed
"""


def _holder(target: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(target)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_lock_held_elsewhere_fails_at_once_or_is_waited_for_and_dies_with_its_holder(tmp_path, monkeypatch):
    import compress.paths as paths

    target = tmp_path / "entry"
    holder = _holder(target)
    with pytest.raises(CompressError, match=f"process {holder.pid} is writing"):
        with locked(target, wait=False):
            pass
    holder.kill()  # kill -9: the kernel releases the lock with the process
    holder.wait()
    with locked(target, wait=False):
        pass
    assert not (tmp_path / ".entry.lock").exists()  # whoever lets go removes the lock file

    holder = _holder(target)
    waiting, released, took_it = threading.Event(), threading.Event(), []
    said = paths.notice

    def notice(message: str) -> None:
        said(message)
        if message.startswith("waiting for "):
            waiting.set()

    def wait_for_the_lock() -> None:
        with locked(target, wait=True):
            took_it.append(released.is_set())

    monkeypatch.setattr(paths, "notice", notice)
    waiter = threading.Thread(target=wait_for_the_lock)
    waiter.start()
    assert waiting.wait(HANG_GUARD)   # it said it waits for the holder (and then waits, however long the holder takes)
    released.set()
    holder.communicate("release\n", timeout=HANG_GUARD)
    waiter.join(HANG_GUARD)
    assert took_it == [True]  # it waited for the holder instead of going ahead


_WRITER = """
import sys
from pathlib import Path
from compress.paths import atomic_dir
target, name = Path(sys.argv[1]), sys.argv[2]
for i in range(int(sys.argv[3])):
    with atomic_dir(target) as tmp:
        for part in range(4):
            (tmp / f"part{part}").write_text(f"{name}-{i}")
"""


def test_concurrent_commits_to_one_directory_all_succeed_and_leave_nothing_behind(tmp_path):
    target = tmp_path / "shared"
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(target), f"w{k}", "25"], cwd=REPO)
               for k in range(3)]
    assert [w.wait(timeout=HANG_GUARD) for w in writers] == [0, 0, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shared"]  # no .tmp-, .old- or .lock left
    contents = {p.name: p.read_text() for p in target.iterdir()}
    assert sorted(contents) == [f"part{i}" for i in range(4)] and len(set(contents.values())) == 1


def test_the_old_directory_is_deleted_only_once_the_new_one_is_in_place(tmp_path, monkeypatch):
    import compress.paths as paths

    target = tmp_path / "swapped"
    with atomic_dir(target) as tmp:
        for part in range(3):
            (tmp / f"part{part}").write_text("old")
    at_delete: list[dict[str, str]] = []
    real_rmtree = paths.shutil.rmtree

    def watching_rmtree(path, *args, **kwargs):
        at_delete.append({p.name: p.read_text() for p in target.iterdir()})  # what a reader of target sees
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(paths.shutil, "rmtree", watching_rmtree)
    with atomic_dir(target) as tmp:
        for part in range(3):
            (tmp / f"part{part}").write_text("new")
    assert at_delete == [{f"part{i}": "new" for i in range(3)}]


def test_an_exception_inside_atomic_dir_keeps_the_old_directory(tmp_path):
    target = tmp_path / "kept"
    with atomic_dir(target) as tmp:
        (tmp / "a").write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_dir(target) as tmp:
            (tmp / "a").write_text("new")
            raise RuntimeError("boom")
    assert (target / "a").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]
