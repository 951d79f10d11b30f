"""The suite owns its caches (tests/conftest.py): every cache points into one new root, and a run that touches the
user's cache fails."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from helpers import HANG_GUARD

from compress.paths import cache_dir

HERE = Path(__file__).resolve().parent


def test_every_cache_points_into_the_suites_own_root():
    root = Path(os.environ["COMPRESS_TESTS_CACHE_ROOT"])
    for variable in ("COMPRESS_CACHE", "HF_HOME", "HF_HUB_CACHE", "XDG_CACHE_HOME", "PIP_CACHE_DIR", "MPLCONFIGDIR"):
        assert Path(os.environ[variable]).is_relative_to(root), variable
    assert cache_dir().is_relative_to(root)
    assert not root.is_relative_to(Path.home() / ".cache")


def test_temporary_files_go_into_the_suites_own_root():
    """The system's temporary folder is the root's, for this process and those the tests start (torchrun's logs, a
    local Ray instance's session folder, a library's scratch directories); pytest's tmp_path stays pytest's."""
    root = Path(os.environ["COMPRESS_TESTS_CACHE_ROOT"])
    assert Path(os.environ["TMPDIR"]).is_relative_to(root)
    assert Path(os.environ["RAY_TMPDIR"]) == root   # Ray reads it before TMPDIR: its sessions go to root/ray
    assert Path.home().is_relative_to(root)   # what a library writes in ~ (OpenVINO's ~/intel) stays in the root
    assert Path(tempfile.gettempdir()).is_relative_to(root)
    child = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"], capture_output=True,
                           text=True, timeout=HANG_GUARD)
    assert Path(child.stdout.strip()).is_relative_to(root), child.stderr


def _inner_suite(tmp_path: Path, test_body: str) -> tuple[subprocess.CompletedProcess, Path]:
    """pytest run in a new process on one test (``test_body``) with this suite's conftest, as a user whose home
    is ``tmp_path/home`` and whose environment names no cache; gives the run and that user's compress cache."""
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(HERE / "conftest.py", suite / "conftest.py")
    (suite / "test_inner.py").write_text(
        "import os\nfrom pathlib import Path\n\n\ndef test_inner():\n"
        "    Path('root.txt').write_text(os.environ['COMPRESS_TESTS_CACHE_ROOT'])\n" + test_body)
    home = tmp_path / "home"
    (home / ".cache" / "compress").mkdir(parents=True)
    (home / ".cache" / "compress" / "kept.txt").write_text("the user's")
    ours = ("COMPRESS_TESTS_CACHE_ROOT", "COMPRESS_CACHE", "HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE",
            "XDG_CACHE_HOME", "PIP_CACHE_DIR", "MPLCONFIGDIR", "TORCHINDUCTOR_CACHE_DIR")
    env = {k: v for k, v in os.environ.items() if k not in ours} | {"HOME": str(home)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           str(suite)], capture_output=True, text=True, env=env, cwd=suite, timeout=HANG_GUARD)
    return done, home / ".cache" / "compress"


def test_a_run_that_writes_only_its_own_cache_passes_and_removes_it(tmp_path: Path):
    done, users = _inner_suite(tmp_path, "    (Path(os.environ['COMPRESS_CACHE']) / 'entry').mkdir(parents=True)\n")
    assert done.returncode == 0, done.stdout + done.stderr
    root = Path((tmp_path / "suite" / "root.txt").read_text())
    assert not root.is_relative_to(users.parent) and not root.exists()
    assert [p.name for p in users.iterdir()] == ["kept.txt"]


def test_a_run_that_writes_the_users_cache_fails(tmp_path: Path):
    # the user's home by its path: the suite points HOME at a folder of its own, so Path.home() is not the user's
    users_file = tmp_path / "home" / ".cache" / "compress" / "kept.txt"
    done, users = _inner_suite(tmp_path, f"    Path({str(users_file)!r}).write_text('x')\n")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert f"the test suite changed the user's cache: compress ({users})" in done.stdout
