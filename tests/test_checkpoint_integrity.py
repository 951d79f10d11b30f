"""A checkpoint is trusted only when its sha256 is the one recorded when it was written: a damaged one is
reported in one line and the training starts afresh (it resumed silently from corrupt weights, and the
damaged history went into log.jsonl and report.md as a normal run's)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import torch
from helpers import HANG_GUARD, REPO, interruptible_run, run_cli, wait_for

from compress.resume import Resume


def _flip(path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    for i in range(int(len(data) * at), int(len(data) * at) + 8):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture
def saved(tmp_path, monkeypatch):
    """A checkpoint written by Resume, and a function that reads it back as a new process would."""
    monkeypatch.setenv("COMPRESS_CACHE", str(tmp_path))
    resume = Resume({"job": 1}, "the test job")
    resume.stage(0, []).save({"weights": torch.arange(10_000, dtype=torch.float32), "batches": 0, "epoch": 1})
    return resume, lambda: Resume({"job": 1}, "the test job").saved


def test_a_checkpoint_reads_back_when_untouched(saved):
    _, read = saved
    assert torch.equal(read()["train"]["weights"], torch.arange(10_000, dtype=torch.float32))


def test_a_flipped_byte_a_truncated_file_or_a_lost_digest_is_refused_in_one_line(saved, capsys):
    resume, read = saved

    def refused(says: str) -> None:
        assert read() is None
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and says in lines[0] and "starting from the beginning" in lines[0], lines

    _flip(resume.file)
    refused("is damaged")
    resume.stage(0, []).save({"weights": torch.ones(3), "batches": 0, "epoch": 1})
    assert read() is not None and not capsys.readouterr().err   # rewritten: trusted again
    resume.file.write_bytes(resume.file.read_bytes()[:-100])
    refused("is damaged")
    resume.stage(0, []).save({"weights": torch.ones(3), "batches": 0, "epoch": 1})
    resume.digests.unlink()   # lost, or a checkpoint of format 1, written before digests were recorded
    refused("has no readable record of its sha256")
    resume.digests.write_text("{")
    refused("has no readable record of its sha256")


def test_a_checkpoint_of_another_format_is_not_resumed_from_and_says_why(saved, capsys, monkeypatch):
    """A checkpoint an older compress wrote (another state layout: format 2 held no kept weights or average) is whole
    but not this version's: one line names both formats and the training starts afresh."""
    import compress.resume as resume_module

    resume, read = saved
    monkeypatch.setattr(resume_module, "FORMAT", resume_module.FORMAT + 1)
    assert read() is None
    line = capsys.readouterr().err.strip()
    assert f"was written by another version of compress (format {resume_module.FORMAT - 1}; this one reads " \
           f"{resume_module.FORMAT})" in line and "starting from the beginning" in line and "\n" not in line


def test_a_kill_between_recording_the_digest_and_the_rename_leaves_the_previous_checkpoint_usable(saved):
    resume, read = saved
    before = resume.file.read_bytes()
    resume.stage(0, []).save({"weights": torch.zeros(3), "batches": 0, "epoch": 2})
    new = json.loads(resume.digests.read_text())["sha256"]
    assert len(new) == 1
    # The moment after the new digest was recorded beside the old one, before state.pt was replaced:
    import hashlib
    resume.file.write_bytes(before)
    resume.digests.write_text(json.dumps({"sha256": [*new, hashlib.sha256(before).hexdigest()]}))
    assert read()["train"]["epoch"] == 1


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return interruptible_run(tmp_path_factory.mktemp("damaged"), 3)


def test_a_damaged_checkpoint_of_a_real_run_is_refused_and_the_run_starts_afresh(tiny):
    out = tiny["root"] / "damaged"
    states = lambda: list((tiny["root"] / "cache" / "unfinished").glob("*/state.pt"))  # noqa: E731
    process = subprocess.Popen([sys.executable, "-m", "compress", *tiny["args"], "--out", str(out)], cwd=REPO,
                               env={**os.environ, **tiny["env"]}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(states, process, "the run's first checkpoint")
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=HANG_GUARD)
    finally:
        process.kill()
    [state] = states()
    _flip(state)   # still a loadable file: torch.load reads damaged weights without a word

    done = run_cli(*tiny["args"], "--out", str(out), env=tiny["env"])
    assert done.returncode == 0, done.stderr
    damaged = [line for line in done.stderr.splitlines() if "is damaged" in line]
    assert len(damaged) == 1 and str(state) in damaged[0] and "resuming" not in done.stderr
    # started afresh: the whole log and the result are the uninterrupted run's
    assert (out / "log.jsonl").read_text() == (tiny["reference"] / "log.jsonl").read_text()
    ours, theirs = (json.loads((d / "metrics.json").read_text())["student"] for d in (out, tiny["reference"]))
    assert (ours["accuracy"], ours["macro_f1"]) == (theirs["accuracy"], theirs["macro_f1"])
