"""The suite owns its caches and temporary files: one new, empty root for the whole run, and a check that the
user's caches stayed as they were.

This module runs before any test module imports compress, transformers or pip: it points every cache those
read (compress's, Hugging Face's, pip's, matplotlib's, the XDG root) at directories under one temporary root,
so a test passes the same on a machine that has fetched and fine-tuned nothing. pytest-xdist's workers inherit
the environment of the process that starts them, so they share the root (the cache's locks make two workers
that need the same entry build it once). Tests that need a cache of their own still point COMPRESS_CACHE at
their ``tmp_path``. When the run ends, the process that made the root removes it, and the run fails if any of
the user's cache directories changed while it ran.

The system's temporary folder is the root's too: TMPDIR (``tmp`` under the root) for every process the tests start
and for the tests' own temporary files (torchrun's ``torchelastic_*`` logs, a library's scratch directories), and
RAY_TMPDIR (the root itself, so Ray's ``ray/session_*`` folder lands in the root and its socket paths stay short of
the 107 bytes a Unix socket's path may have). pytest keeps its own ``tmp_path`` folders where it always does.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_ROOT = "COMPRESS_TESTS_CACHE_ROOT"  # set once by the first process; xdist workers find it and reuse the root


def user_caches() -> dict[str, Path]:
    """The cache directories this environment would give compress, Hugging Face and pip (read before
    the suite replaces them)."""
    xdg = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    hf = Path(os.environ.get("HF_HOME") or xdg / "huggingface").expanduser()
    return {"compress": Path(os.environ.get("COMPRESS_CACHE") or Path.home() / ".cache" / "compress").expanduser(),
            "Hugging Face": hf,
            "Hugging Face hub": Path(os.environ.get("HF_HUB_CACHE") or hf / "hub").expanduser(),
            "pip": Path(os.environ.get("PIP_CACHE_DIR") or xdg / "pip").expanduser()}


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """Every entry under ``directory`` (not following links): relative path -> (size, modification time)."""
    entries = {}
    for top, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(top) / name
            try:
                st = path.lstat()
            except FileNotFoundError:  # removed while we walked: the next snapshot will not list it
                continue
            entries[str(path.relative_to(directory))] = (st.st_size, st.st_mtime_ns)
    return entries


def _suite_environment(root: Path) -> dict[str, str]:
    return {"COMPRESS_CACHE": str(root / "compress"), "XDG_CACHE_HOME": str(root / "xdg"),
            "HF_HOME": str(root / "huggingface"), "HF_HUB_CACHE": str(root / "huggingface" / "hub"),
            "HF_DATASETS_CACHE": str(root / "huggingface" / "datasets"), "PIP_CACHE_DIR": str(root / "pip"),
            "MPLCONFIGDIR": str(root / "matplotlib"), "TORCHINDUCTOR_CACHE_DIR": str(root / "torchinductor"),
            "TMPDIR": str(root / "tmp"), "RAY_TMPDIR": str(root),
            # what libraries write in the home folder (OpenVINO's telemetry id in ~/intel, Ray's ~/.ray) stays here too
            "HOME": str(root / "home")}


_made_here = _ROOT not in os.environ
_watched: dict[str, tuple[Path, dict[str, tuple[int, int]]]] = {}
if _made_here:
    _watched = {what: (path, snapshot(path)) for what, path in user_caches().items()}
    os.environ[_ROOT] = tempfile.mkdtemp(prefix="compress-tests-")
os.environ.update(_suite_environment(Path(os.environ[_ROOT])))
os.makedirs(os.environ["TMPDIR"], exist_ok=True)   # tempfile passes over a TMPDIR that does not exist
os.makedirs(os.environ["HOME"], exist_ok=True)
# One thread per process unless a test asks for more: `make test` already runs one worker per CPU, and two workers
# whose torch each spins two OpenMP threads on two cores ran five times slower than with one each (two concurrent
# `compress pretrain` of the tiny teacher: 51 s against 10 s). Speed measurements fix their own counts (--threads).
os.environ.setdefault("OMP_NUM_THREADS", "1")


def changed_caches() -> list[str]:
    """The user's cache directories whose content differs from the snapshot taken when the suite started."""
    return [f"{what} ({path})" for what, (path, before) in _watched.items() if snapshot(path) != before]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if not _made_here:
        return
    shutil.rmtree(os.environ[_ROOT], ignore_errors=True)
    if changed := changed_caches():
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"the test suite changed the user's cache: {', '.join(changed)}; a test reached past its own caches."
        if reporter is not None:
            reporter.write_line(f"FAILED {message}", red=True, bold=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_in_the_root(tmp_path_factory: pytest.TempPathFactory) -> None:
    """This process's own temporary files under the root's TMPDIR too (tempfile read the system's before it was set,
    when the root was made), once pytest has placed its ``tmp_path`` folders where it keeps them."""
    tmp_path_factory.getbasetemp()
    tempfile.tempdir = None   # read again from TMPDIR on next use


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cuda: needs a CUDA device; collected everywhere, skipped where there is none "
                                       "(CI has none: benchmarks/gpu_check.sh runs them on a GPU)")
    config.addinivalue_line("markers", "minutes(n): a test file that holds one CI worker about n minutes; files run "
                                       "longest first, so the two workers end together")


def _minutes(item: pytest.Item) -> float:
    marker = item.get_closest_marker("minutes")
    return float(marker.args[0]) if marker else 0.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Longest files first (a stable sort: each file's tests stay together and in order). `make test` hands whole
    # files to the workers in this order (--dist loadfile --no-loadscope-reorder): a long file that started last
    # would run on one worker while the other waits.
    items.sort(key=lambda item: -_minutes(item))
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (CI has none; benchmarks/gpu_check.sh runs it on a GPU)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@dataclass(frozen=True)
class RayCluster:
    address: str    # HOST:PORT, for --address
    token: str      # its token (Ray's token authentication), in this process's RAY_AUTH_TOKEN while it runs
    root: Path      # its temporary directory (session folders, sockets, the workers' logs)


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[RayCluster]:
    """A real Ray cluster of two nodes on this machine, one CPU each, for the tests of one module: a head (`ray start
    --head`) and a second node joining it over 127.0.0.1, with a token of their own (Ray's token authentication;
    nothing is written to ~/.ray), which this process's environment holds while the module runs (the commands the
    tests start pass it on). Stopped after the module by ending exactly its processes
    (tests/helpers.py ``cluster_processes``), so a Ray instance another test started is left alone (`ray stop` would
    end every one)."""
    import secrets
    import signal
    import socket
    import subprocess
    import sys
    import time

    from helpers import HANG_GUARD, cluster_processes, wait_for

    ray = Path(sys.executable).parent / "ray"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = secrets.token_hex(32)
    root = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))   # short: Ray's socket paths must fit 107 bytes
    common = ["--num-cpus=1", "--disable-usage-stats"]
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        monkeypatch.setenv("RAY_AUTH_TOKEN", token)   # the nodes', and the commands': run_cli passes os.environ on
        try:
            subprocess.run([str(ray), "start", "--head", f"--port={port}", "--include-dashboard=false",
                            f"--temp-dir={root}", *common], check=True, capture_output=True, timeout=HANG_GUARD)
            subprocess.run([str(ray), "start", f"--address=127.0.0.1:{port}", *common], check=True,
                           capture_output=True, timeout=HANG_GUARD)
            yield RayCluster(f"127.0.0.1:{port}", token, root)
        finally:
            def signal_all(signal_number: int) -> list[int]:
                found = cluster_processes(token, root)
                for pid in found:
                    try:
                        os.kill(pid, signal_number)
                    except ProcessLookupError:
                        pass
                return found

            signal_all(signal.SIGTERM)
            time.sleep(2)   # a grace period to end cleanly, not a deadline: whatever is left is killed next
            # killed again until none is left (a process Ray started meanwhile included): the cluster has ended
            wait_for(lambda: not signal_all(signal.SIGKILL), what="the end of the test's Ray cluster", poll=0.2)
            shutil.rmtree(root, ignore_errors=True)
