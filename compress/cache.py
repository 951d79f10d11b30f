"""Cache entries that prove they are intact: checksums written with the entry, verified when it is used.

An entry is a directory under :func:`compress.paths.cache_dir` (a fine-tuned teacher, tokenized
splits, teacher logits, a general-distilled student, an augmented train split). When it is built,
``checksums.json`` records the size and sha256 of every file in it; when it is used, every file is
checked against that record. A damaged or incomplete entry is rebuilt, and the run says so in one
line. sha256 runs at over 1 GB/s on CPUs with SHA extensions (90 MB of teacher weights: about
0.06 s here), and an entry verified once is not hashed again by the same process while its files'
sizes and modification times stay the same.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from compress.distributed import barrier, broadcast, main_first, world
from compress.paths import atomic_dir, atomic_write_text, locked, notice, reading

CHECKSUMS = "checksums.json"
_FORMAT = 1

T = TypeVar("T")


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name != CHECKSUMS)


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def write_checksums(directory: Path) -> None:
    """Record the size and sha256 of every file under ``directory`` in ``directory/checksums.json``."""
    files = {p.relative_to(directory).as_posix(): {"size": p.stat().st_size, "sha256": sha256_file(p)}
             for p in _files(directory)}
    atomic_write_text(directory / CHECKSUMS, json.dumps({"format": _FORMAT, "files": files}, indent=1))


# Entries verified by this process: directory -> the (name, size, mtime) of its files when verified.
_verified: dict[Path, tuple] = {}


def _stats(directory: Path) -> tuple:
    return tuple((p.as_posix(), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
                 for p in _files(directory) for st in [p.stat()])


def verify(directory: Path) -> str | None:
    """``None`` when ``directory`` is a complete, intact entry; otherwise what is wrong, in a few words."""
    directory = Path(directory)
    if not directory.is_dir():
        return "absent"
    try:
        recorded = json.loads((directory / CHECKSUMS).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{CHECKSUMS} is missing or unreadable"
    key = directory.absolute()
    stats = _stats(directory)
    if _verified.get(key) == stats:
        return None
    present = {p.relative_to(directory).as_posix(): p for p in _files(directory)}
    for name, expected in recorded.items():
        path = present.pop(name, None)
        if path is None:
            return f"{name} is missing"
        if path.stat().st_size != expected["size"]:
            return f"{name} has {path.stat().st_size} bytes instead of {expected['size']}"
        if sha256_file(path) != expected["sha256"]:
            return f"{name} was altered (sha256 differs)"
    if present:
        return f"{next(iter(present))} was added after the entry was written"
    _verified[key] = stats
    return None


def cached(target: Path, what: str, build: Callable[[Path], None], load: Callable[[Path], T],
           collective: bool = False) -> tuple[T, bool]:
    """The entry ``target`` loaded with ``load``, built first with ``build(tmp)`` when absent or damaged.

    Returns ``(value, hit)``. Building happens under the target's lock: a second process asking for the
    same entry waits for the first and then uses its result. A damaged entry is reported in one line
    (naming it and what was wrong) and rebuilt; ``load`` may raise ``ValueError`` to say an intact
    entry does not fit (another format), which rebuilds it too.

    Under a launcher (see :mod:`compress.distributed`) rank 0 alone writes the entry. A ``collective``
    build trains data-parallel, so every rank runs it (the others into a directory thrown away after);
    any other build runs on rank 0 while the others wait, then load what it wrote.
    """
    target = Path(target)
    if world().size > 1:
        if not collective:
            with main_first():
                return _cached(target, what, build, load)
        intact = broadcast(_use(target, load)[1] is None if world().is_main else None)
        if not intact:
            if world().is_main:
                value, hit = _cached(target, what, build, load)
            else:
                with tempfile.TemporaryDirectory() as throwaway:
                    build(Path(throwaway))
            barrier()
            return (value, hit) if world().is_main else (load(target), False)
    return _cached(target, what, build, load)


def _cached(target: Path, what: str, build: Callable[[Path], None], load: Callable[[Path], T]) -> tuple[T, bool]:
    value, problem = _use(target, load)
    if problem is None:
        return value, True
    with locked(target, what=f"the {what} in {target}"):
        value, problem = _use(target, load)   # another process may have built it while we waited
        if problem is None:
            return value, True
        if problem != "absent":
            notice(f"the cached {what} in {target} is damaged ({problem}); rebuilding it "
                   f"(`rm -r {target}` clears it).")
        with atomic_dir(target) as tmp:
            build(tmp)
            write_checksums(tmp)
    return load(target), False


def unreadable(error: Exception) -> ValueError:
    """The ``ValueError`` a ``load`` raises for an intact entry it cannot read (so it is rebuilt)."""
    return ValueError(f"unreadable: {type(error).__name__}: {error}".splitlines()[0][:200])


def _use(target: Path, load: Callable[[Path], T]) -> tuple[T | None, str | None]:
    """``(value, None)`` for an intact entry that loads, else ``(None, what is wrong)``; read under a shared lock
    (:func:`compress.paths.reading`), so a prune of the cache meanwhile leaves the entry alone."""
    with reading(target):
        problem = verify(target)
        if problem is not None:
            return None, problem
        try:
            return load(target), None
        except ValueError as e:
            return None, str(e)
