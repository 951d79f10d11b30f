"""Where compress keeps its cache, and how it writes files without leaving half of one behind.

Every directory compress writes (a run, a comparison, a cache entry) has a lock: a file
``.NAME.lock`` beside it, held with ``flock`` while a process builds or replaces it. The kernel
releases the lock when its process dies, however it dies, so a killed run never blocks the next
one; the file itself is removed by whoever releases the lock. While the lock is held, the temporary
``.NAME.tmp-*`` and ``.NAME.old-*`` siblings of the target can only be left over from a process that
died, and are removed.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from compress.errors import CompressError


def cache_dir() -> Path:
    """The cache root: ``$COMPRESS_CACHE``, else ``~/.cache/compress``."""
    root = os.environ.get("COMPRESS_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "compress"


def notice(message: str) -> None:
    """One line for the user on stderr, from the library (a cache rebuilt, a wait for a lock)."""
    from rich.console import Console
    from rich.markup import escape

    # escaped: a path such as /data/[old]/cache would otherwise lose "[old]" (or raise, for "[/x]")
    Console(stderr=True).print(f"[yellow]![/] {escape(message)}", highlight=False, soft_wrap=True)


# A full disk or an exhausted quota. Libraries written in Rust (safetensors, tokenizers) report it in their own
# exception's text, "No space left on device (os error 28)", rather than as an OSError.
_FULL = (errno.ENOSPC, errno.EDQUOT)


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error`` says the disk (or the user's quota) had no room for what was being written."""
    if isinstance(error, OSError) and error.errno in _FULL:
        return True
    return any(f"(os error {code})" in str(error) for code in _FULL)


def _megabytes(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 100_000 else f"{n / 1e3:,.0f} kB"


def _size_of(path: Path) -> int:
    """Bytes in the files under ``path`` (or of the file ``path``); 0 where there is nothing."""
    try:
        if path.is_file():
            return path.stat().st_size
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    except OSError:
        return 0


class DiskFull(CompressError):
    """A write that ran out of space (exit 1: nothing was wrong with the input)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=1)


def _full(error: BaseException, where: Path) -> bool:
    """Whether ``error`` (raised while writing under ``where``) says the disk was full: in so many words, or a
    library's bare write failure (torch.save: "file write failed") on a disk with almost nothing left."""
    if isinstance(error, DiskFull) or is_disk_full(error):
        return True
    if isinstance(error, RuntimeError) and "write" in str(error).lower():
        try:
            return shutil.disk_usage(where).free < 16 * 2**20
        except OSError:
            return False
    return False


def disk_full(target: Path, written: int) -> DiskFull:
    """The sentence for a write of ``target`` that ran out of space after ``written`` bytes (exit 1: nothing was wrong
    with the input)."""
    where = Path(target).absolute().parent
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = _megabytes(shutil.disk_usage(where).free)
    except OSError:
        free = "an unknown amount"
    progress = f", and ran out after writing {_megabytes(written)} of it" if written else ""
    return DiskFull(f"no space left for {target}: it needs more than the {free} free on the disk (or quota) "
                    f"holding it{progress}; nothing of it was kept. Free some space (`compress cache prune`) or write "
                    "it elsewhere.")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def as_ordinary_file(path: Path) -> None:
    """Give ``path`` the permissions of a file created with open() (safetensors writes 0600)."""
    os.chmod(path, 0o666 & ~_umask())


# Linux's ioctl that makes a file share another's blocks until either is written (btrfs, XFS, bcachefs): a copy that
# costs no space and is still two files, each changed alone.
_FICLONE = 0x40049409


def clone_or_copy(source: str, target: str) -> None:
    """Copy ``source`` to ``target`` (a ``shutil.copytree`` copy function): a copy-on-write clone where the filesystem
    makes one, else an ordinary copy; either way two files, so that writing one never changes the other (a hard
    link would be one file under two names)."""
    try:
        with open(source, "rb") as src, open(target, "wb") as dst:
            fcntl.ioctl(dst.fileno(), _FICLONE, src.fileno())
        shutil.copystat(source, target)
    except OSError:   # no clones here (ext4, tmpfs, another filesystem): the bytes themselves
        shutil.copy2(source, target)


def lock_path(target: Path) -> Path:
    return target.parent / f".{target.name}.lock"


# Locks this process holds: lock file -> (descriptor, depth). flock locks belong to an open file,
# so taking the same lock twice in one process through two descriptors would wait for itself.
_held: dict[Path, list[int]] = {}


def try_lock(path: Path, wait: bool) -> int | None:
    """A descriptor holding ``path``'s lock, or None when another process holds it and ``wait`` is off."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            raise
        # The holder before us unlinks the file as it lets go; if it did, this lock guards nothing.
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)


def holder(path: Path) -> str:
    """Who holds the lock file ``path``, as the last process to take it for writing recorded (its pid, where that
    process still runs)."""
    try:
        pid = path.read_text().strip()
        os.kill(int(pid), 0)
    except (OSError, ValueError):
        return "another process"
    return f"process {pid}"


@contextmanager
def reading(target: Path) -> Iterator[None]:
    """Hold a shared lock on ``target`` while reading it (checking and loading or copying a cache entry), so that
    ``compress cache prune`` and ``clear``, which take the lock exclusively and without waiting, leave it alone.

    Taken without waiting: where a writer holds the lock (building or removing the entry) the read goes on without
    it, as reads did before (the entry's checksums catch what a writer changed). Nothing is taken where this process
    holds the target's lock already. The last process to let go of the lock file removes it."""
    path = lock_path(Path(target).absolute())
    fd = None
    if path not in _held and path.parent.is_dir():
        for _ in range(3):   # a writer letting go removes the file: take the lock of the file that is there
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
            except OSError:
                break
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    break
            except OSError:   # a writer holds it (EWOULDBLOCK), or the file went meanwhile
                pass
            os.close(fd)
            fd = None
    try:
        yield
    finally:
        if fd is not None:
            try:   # the last one out removes the file, as a writer does (a later one checks the inode it locked)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.stat(path).st_ino == os.fstat(fd).st_ino:
                    path.unlink()
            except OSError:   # another reader or a writer holds it now: it stays for them
                pass
            os.close(fd)


@contextmanager
def locked(target: Path, *, wait: bool = True, what: str | None = None) -> Iterator[None]:
    """Hold ``target``'s lock for the block (re-entrant within a process).

    With ``wait``, a lock held by another process is waited for, after one line saying so; without,
    it is a :class:`CompressError` naming the holder. Stale temporary siblings of ``target`` are
    removed once the lock is ours.
    """
    target = Path(target).absolute()
    path = lock_path(target)
    if path in _held:
        _held[path][1] += 1
        try:
            yield
        finally:
            _held[path][1] -= 1
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = try_lock(path, wait=False)
    except OSError as e:
        raise CompressError(f"cannot write in {target.parent} ({e.strerror}); choose another place.") from None
    if fd is None:
        what = what or f"in {target}"
        if not wait:
            raise CompressError(f"{holder(path)} is writing {what} right now; wait for it to finish or choose "
                                "another --out.")
        notice(f"waiting for {holder(path)}, which is writing {what}.")
        fd = try_lock(path, wait=True)
    _held[path] = [fd, 1]
    try:
        _remove_stale(target)
        yield
    finally:
        del _held[path]
        path.unlink(missing_ok=True)
        os.close(fd)


def _temporaries(target: Path) -> list[Path]:
    pattern = re.compile(rf"\.{re.escape(target.name)}\.(tmp|old)-[A-Za-z0-9_]{{8}}")
    try:
        return [p for p in target.parent.iterdir() if pattern.fullmatch(p.name)]
    except OSError:
        return []


def _remove_stale(target: Path) -> None:
    stale = _temporaries(target)
    for p in stale:
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    if stale:
        notice(f"removed {len(stale)} temporary director{'y' if len(stale) == 1 else 'ies'} left beside "
               f"{target} by a run that was killed.")


def _aside(target: Path) -> Path:
    """A free name beside ``target`` to move the old version to before it is deleted."""
    return Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))


def replace_dir(tmp: Path, target: Path) -> None:
    """Put directory ``tmp`` in ``target``'s place: the old one is moved aside first and deleted after,
    so a reader sees the old directory or the new one, never part of either."""
    if target.exists() or target.is_symlink():
        old = _aside(target)
        os.replace(target, old / target.name)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)
    _committed.append(target.absolute())


_committed: list[Path] = []


def committed() -> list[Path]:
    """The directories this process completed that still exist (what an interrupted command kept)."""
    return [p for p in dict.fromkeys(_committed) if p.exists()]


@contextmanager
def atomic_dir(target: Path) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces ``target`` (see :func:`replace_dir`).

    The target's lock is held throughout (waited for when another process holds it). On an exception,
    Ctrl-C or SIGTERM the temporary directory is removed and ``target`` is left untouched.
    """
    target = Path(target)
    with locked(target):
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes it private; the result is an ordinary directory
        try:
            yield tmp
            replace_dir(tmp, target)
        except BaseException as e:   # a full disk inside (a file of the entry: DiskFull too) names the entry
            full = _full(e, tmp)
            written = _size_of(tmp) if full else 0
            shutil.rmtree(tmp, ignore_errors=True)
            if full:
                raise disk_full(target, written) from None
            raise


@contextmanager
def atomic_file(path: Path) -> Iterator[Path]:
    """Yield a temporary file beside ``path`` (unique to this call) to write; renamed to ``path`` when the
    block ends, removed if it raises: a reader sees the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)   # a leftover's name, if killed
    os.close(fd)
    as_ordinary_file(Path(tmp))
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        full = _full(e, path.parent)
        written = _size_of(Path(tmp)) if full else 0
        Path(tmp).unlink(missing_ok=True)
        if full:
            raise disk_full(path, written) from None
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename (:func:`atomic_file`)."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename (:func:`atomic_file`)."""
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)
