"""A full disk while writing a teacher, a cache entry or a file: one sentence naming the path and the space, exit 1,
and nothing half-written left. The disk is a real one: a small tmpfs mounted in a user and mount namespace of the
test's own (``unshare -rm``), so nothing is mounted on the machine outside the test's processes."""

from __future__ import annotations

import errno
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import REPO

from compress.paths import is_disk_full

pytestmark = pytest.mark.skipif(
    shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0,
    reason="unshare -rm (a user and mount namespace) is not available here")


def _on_a_small_disk(tmp_path: Path, command: str, size: str = "1m") -> subprocess.CompletedProcess[str]:
    """``command`` (sh) run with ``tmp_path/disk`` a tmpfs of ``size``, seen only by that command."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = f"mount -t tmpfs -o size={size} tmpfs {disk} && cd {REPO} && {command}; code=$?; ls -A {disk}; exit $code"
    return subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True,
                          env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
                               "COMPRESS_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"})


def test_a_teacher_written_to_a_full_disk_is_one_sentence_exit_1_and_leaves_nothing(tmp_path):
    done = _on_a_small_disk(tmp_path, f"{sys.executable} -m compress teachers init {tmp_path}/disk/teacher --like "
                                      "minilm")
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, done.stderr
    assert f"no space left for {tmp_path}/disk/teacher: it needs more than the " in lines[0]
    assert "MB free on the disk (or quota) holding it" in lines[0] and "nothing of it was kept" in lines[0]
    assert done.stdout.strip() == ""    # `ls -A` of the disk after the command: no temporary directory left


def test_a_cache_entry_and_a_file_on_a_full_disk_are_refused_whole(tmp_path):
    """A cache entry built with compress.cache.cached and a file written with atomic_write_text: the error names
    what was written and how far it got; neither the entry, its temporary directory nor the file is left."""
    script = textwrap.dedent(f"""
        from pathlib import Path
        from compress.cache import cached
        from compress.errors import CompressError
        from compress.paths import atomic_write_text
        disk = Path("{tmp_path}/disk")
        def build(tmp):
            (tmp / "a.bin").write_bytes(b"x" * 300_000)
            (tmp / "b.bin").write_bytes(b"x" * 300_000)
        try:
            cached(disk / "entry", "test entry", build, lambda t: None)
        except CompressError as e:
            print("entry", e.exit_code, e)
        try:
            atomic_write_text(disk / "file.txt", "y" * 1_000_000)
        except CompressError as e:
            print("file", e.exit_code, e)
    """)
    done = _on_a_small_disk(tmp_path, f"{sys.executable} -c '{script}'", size="512k")
    assert done.returncode == 0, done.stderr
    entry, file, *left = done.stdout.splitlines()
    assert entry.startswith(f"entry 1 no space left for {tmp_path}/disk/entry: it needs more than the ")
    assert "ran out after writing" in entry and "nothing of it was kept" in entry
    assert file.startswith(f"file 1 no space left for {tmp_path}/disk/file.txt: it needs more than the ")
    assert left == []    # `ls -A` of the disk: no entry, no temporary directory, no lock, no file


def test_what_counts_as_a_full_disk():
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    # safetensors and tokenizers (Rust) say it in their own exception's text
    assert is_disk_full(RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not is_disk_full(ValueError("no space in this sentence"))
