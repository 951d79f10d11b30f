"""Where compress keeps its cache, and how it writes files without leaving half of one behind."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def cache_dir() -> Path:
    """The cache root: ``$COMPRESS_CACHE``, else ``~/.cache/compress``."""
    root = os.environ.get("COMPRESS_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "compress"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def as_ordinary_file(path: Path) -> None:
    """Give ``path`` the permissions of a file created with open() (safetensors writes 0600)."""
    os.chmod(path, 0o666 & ~_umask())


@contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces ``target`` in one rename.

    On an exception the temporary directory is removed and ``target`` is left untouched,
    so a reader never sees a half-written directory.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; the result is an ordinary directory
    try:
        yield tmp
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    as_ordinary_file(Path(tmp))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
