"""What the cache holds, and removing entries from it without harm: the library under `compress cache`.

The cache root (:func:`compress.paths.cache_dir`) holds one folder per kind of entry
(:data:`compress.cache_kinds.KINDS`, where each kind says how an entry of its own is recognised by its content and
what made it): fine-tuned teachers, tokenized splits, the teacher's stored outputs, the run store, transfer data,
probes and the rest. An entry is a directory (or, for the probe kinds, one JSON file) that compress wrote. Anything
else under the root (an unknown folder, a stray file, a symbolic link, an entry without its marker) is *other*: listed
with its size, never removed.

Sizes are allocated bytes (``st_blocks * 512``, as ``du`` counts them; a file with several hard links once), never
following a symbolic link, so that the entries, the others and the folders themselves add up to ``du -s`` of the
root. An entry's age is the time since it, or a file at its top, was last modified (entries record no last use).

An entry is *in use* while another process holds its lock (``.NAME.lock``): a process building or replacing it holds
it exclusively (:func:`compress.paths.locked`), one checking and loading or copying it shared
(:func:`compress.paths.reading`; a path a load hands on and reads later is not covered). Listing tests that lock
without taking it; removing takes it, without waiting, and holds it while the entry is moved aside
(``.NAME.old-*``, as :func:`compress.paths.replace_dir` does) and deleted, so nobody starts to use an entry while it
goes, and nobody sees part of one. An unfinished training's checkpoint (``unfinished/``) has no lock: one written in
the last :data:`UNFINISHED_QUIET` seconds counts as in use. Temporary directories that a killed process left beside an
entry (``.NAME.tmp-*``, ``.NAME.old-*``) are listed as leftovers; prune and clear remove them unless the entry's lock
is held (then they are being written).

Nothing here imports torch: `compress cache` answers at once.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from compress.cache_kinds import KINDS, Kind
from compress.errors import CompressError
from compress.paths import cache_dir, holder, lock_path, try_lock
from compress.quantities import human_age, human_size

UNFINISHED_QUIET = 24 * 3600   # an unfinished checkpoint written this recently may belong to a training still running
_LEFTOVER = re.compile(r"\.(?P<name>.+)\.(?P<how>tmp|old)-[A-Za-z0-9_]{8}")
_LOCK = re.compile(r"\.(?P<name>.+)\.lock")


# --- records -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One entry of the cache (or a leftover temporary directory beside one)."""

    kind: str            # its folder, a key of KINDS
    name: str            # its name in that folder
    path: Path
    size: int            # allocated bytes
    modified: float      # seconds since the epoch: its last modification
    made_by: str         # what made it, one short phrase
    in_use: str | None   # why it cannot be removed now (its lock is held, ...); None: it can
    leftover: bool = False   # a temporary directory a killed process left beside an entry

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.name}"

    def age(self, now: float) -> float:
        return max(0.0, now - self.modified)


@dataclass(frozen=True)
class Other:
    """Something under the cache root that is no entry of ours: listed, never removed."""

    path: Path
    size: int
    why: str


@dataclass(frozen=True)
class Inventory:
    """Everything under the cache root: entries, others, and the folders themselves (the root, the kind folders and
    the lock files in them); their sizes add up to ``total``, what ``du -s`` says of the root."""

    root: Path
    entries: list[Entry]
    others: list[Other]
    folders: int   # bytes of the root and kind folders themselves and of the lock files in them

    @property
    def total(self) -> int:
        return sum(e.size for e in self.entries) + sum(o.size for o in self.others) + self.folders

    def by_group(self) -> list[tuple[str, int, int]]:
        """(group, entries, bytes) for every group that holds something, in the order of :data:`KINDS`."""
        sums: dict[str, list[int]] = {}
        for kind in KINDS.values():
            sums.setdefault(kind.group, [0, 0])
        for entry in self.entries:
            totals = sums[KINDS[entry.kind].group]
            totals[0] += 1
            totals[1] += entry.size
        return [(group, n, size) for group, (n, size) in sums.items() if n]


@dataclass(frozen=True)
class Removal:
    """What a prune or clear did: the entries it removed and the bytes that freed, those it left because they were in
    use, and what it never removes (others)."""

    root: Path
    removed: list[Entry]
    freed: int
    skipped: list[Entry]
    left: list[Other] = field(default_factory=list)
    unmet: str | None = None   # why --max-size could not be reached, if it could not


@dataclass(frozen=True)
class PruneRule:
    """What a prune removes: entries older than ``older_than`` seconds, all but the ``keep_last`` newest of each kind,
    then the oldest until the cache is at most ``max_size`` bytes (None: that rule is off)."""

    older_than: float | None = None
    keep_last: int | None = None
    max_size: int | None = None

    def __post_init__(self) -> None:
        if self.older_than is None and self.keep_last is None and self.max_size is None:
            raise CompressError("say what to prune: --older-than (e.g. 30d), --keep-last N or --max-size (e.g. 20G).")
        if self.older_than is not None and self.older_than < 0:
            raise CompressError(f"--older-than must be 0 or more, got {self.older_than:g} seconds.")
        if self.keep_last is not None and self.keep_last < 0:
            raise CompressError(f"--keep-last must be 0 or more, got {self.keep_last}.")
        if self.max_size is not None and self.max_size < 0:
            raise CompressError(f"--max-size must be 0 or more, got {self.max_size} bytes.")


# --- sizes, ages, locks --------------------------------------------------------------------------------------------


def _tree(path: Path) -> Iterator[os.stat_result]:
    """The lstat of ``path`` and of everything under it, never following a symbolic link."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    yield st
    if not stat.S_ISDIR(st.st_mode):
        return
    try:
        children = list(os.scandir(path))
    except OSError:   # gone meanwhile, or unreadable (du cannot count under it either)
        return
    for child in children:
        yield from _tree(Path(child.path))


def _allocated(path: Path, seen: set[tuple[int, int]]) -> int:
    """Allocated bytes of ``path`` and all under it; a file with several links counted once, at its first sight in
    ``seen`` (shared by one inventory, as ``du`` counts one invocation)."""
    total = 0
    for st in _tree(path):
        if not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1:
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
        total += st.st_blocks * 512
    return total


def _freed_by(path: Path) -> int:
    """The bytes removing ``path`` frees: a file with several links counts only when all its links lie under it."""
    total, links = 0, {}
    for st in _tree(path):
        if stat.S_ISDIR(st.st_mode) or st.st_nlink == 1:
            total += st.st_blocks * 512
            continue
        key = (st.st_dev, st.st_ino)
        found, _, blocks = links.get(key, (0, st.st_nlink, st.st_blocks))
        links[key] = (found + 1, st.st_nlink, blocks)
    return total + sum(blocks * 512 for found, nlink, blocks in links.values() if found >= nlink)


def _modified(path: Path) -> float:
    """The newest modification time of ``path`` and of what is directly in it (0 when it is gone)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return 0.0
    newest = st.st_mtime
    if stat.S_ISDIR(st.st_mode):
        try:
            for child in os.scandir(path):
                newest = max(newest, child.stat(follow_symlinks=False).st_mtime)
        except OSError:
            pass
    return newest


def _lock_held(lock: Path) -> bool:
    """Whether another process holds ``lock`` now, tested with a shared lock taken and let go at once (no file is
    created or removed)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False   # no lock file: nobody holds it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as e:
        return e.errno in (errno.EWOULDBLOCK, errno.EAGAIN)
    finally:
        os.close(fd)   # closing lets a lock we took go
    return False


def _locked_by(target: Path) -> str | None:
    """Who holds ``target``'s lock now (None: nobody)."""
    lock = lock_path(target)
    return f"in use by {holder(lock)}" if _lock_held(lock) else None


def _too_recent(kind: str, modified: float, now: float) -> str | None:
    """Why an entry without a lock (an unfinished training's checkpoint) counts as in use, if it does."""
    if kind == "unfinished" and now - modified < UNFINISHED_QUIET:
        return f"written {human_age(now - modified)} ago, by a training that may still run"
    return None


# --- the inventory -------------------------------------------------------------------------------------------------


def _root(root: Path | None) -> Path:
    return (Path(root) if root is not None else cache_dir()).expanduser().resolve()


def inventory(root: Path | None = None, now: float | None = None) -> Inventory:
    """What the cache root (``root``, default :func:`compress.paths.cache_dir`) holds."""
    root, now = _root(root), time.time() if now is None else now
    seen: set[tuple[int, int]] = set()
    entries: list[Entry] = []
    others: list[Other] = []
    folders = 0
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return Inventory(root, [], [], 0)
    if not stat.S_ISDIR(st.st_mode):
        raise CompressError(f"the cache root {root} is not a directory; point COMPRESS_CACHE at one.")
    folders += st.st_blocks * 512
    for child in sorted(root.iterdir()):
        kind = KINDS.get(child.name)
        try:
            child_st = os.lstat(child)
        except FileNotFoundError:   # gone since the root was read
            continue
        if kind is None or not stat.S_ISDIR(child_st.st_mode):
            why = "a symbolic link (not followed)" if stat.S_ISLNK(child_st.st_mode) else \
                "not a folder of compress's" if kind is None else "should be a folder"
            others.append(Other(child, _allocated(child, seen), why))
            continue
        folders += child_st.st_blocks * 512
        found, strangers, locks = _kind_entries(kind, child, seen, now)
        entries += found
        others += strangers
        folders += locks
    entries.sort(key=lambda e: (list(KINDS).index(e.kind), -e.modified, e.name))
    return Inventory(root, entries, others, folders)


def _kind_entries(kind: Kind, folder: Path, seen: set[tuple[int, int]],
                  now: float) -> tuple[list[Entry], list[Other], int]:
    """The entries in one kind's folder, what else is there (others), and the bytes of its lock files (a lock file
    lives only while its lock is held, and is counted with the folder)."""
    entries: list[Entry] = []
    others: list[Other] = []
    locks = 0
    for path in sorted(folder.iterdir()):
        name = path.name
        try:
            st = os.lstat(path)
        except FileNotFoundError:   # gone since the folder was read
            continue
        if _LOCK.fullmatch(name) and stat.S_ISREG(st.st_mode):
            locks += _allocated(path, seen)
            continue
        leftover = _LEFTOVER.fullmatch(name)
        regular = stat.S_ISREG(st.st_mode) if kind.files else stat.S_ISDIR(st.st_mode)
        if leftover and (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            owner = leftover.group("name")
            in_use = _locked_by(folder / owner)
            made_by = f"being written ({owner})" if in_use else f"left by a killed process ({owner})"
            entries.append(Entry(kind.folder, name, path, _allocated(path, seen), _modified(path), made_by, in_use,
                                 leftover=True))
            continue
        if stat.S_ISLNK(st.st_mode) or name.startswith(".") or not regular or not kind.ours(path):
            why = "a symbolic link (not followed)" if stat.S_ISLNK(st.st_mode) else \
                "not an entry compress wrote (no checksums or record of its own)"
            others.append(Other(path, _allocated(path, seen), why))
            continue
        modified = _modified(path)
        entries.append(Entry(kind.folder, name, path, _allocated(path, seen), modified, kind.made_by(path) or kind.what,
                             _locked_by(path) or _too_recent(kind.folder, modified, now)))
    return entries, others, locks


# --- removing ------------------------------------------------------------------------------------------------------


def _inside(path: Path, root: Path) -> bool:
    """Whether ``path`` is an entry's place: directly in a kind folder of ``root``, neither folder a link."""
    folder = path.parent
    return (folder.parent == root and folder.name in KINDS and not folder.is_symlink()
            and os.path.realpath(folder) == str(root / folder.name) and not path.is_symlink())


def _remove(entry: Entry, root: Path, now: float) -> tuple[int, str | None]:
    """Remove ``entry`` under its lock: (bytes freed, None), or (0, why it was left)."""
    if not _inside(entry.path, root):
        return 0, "not inside the cache root"
    owner = _LEFTOVER.fullmatch(entry.name).group("name") if entry.leftover else entry.name
    target = entry.path.parent / owner
    if not entry.leftover and (why := _too_recent(entry.kind, _modified(entry.path), now)):
        return 0, why
    lock = lock_path(target)
    had_lock = os.path.lexists(lock)   # a lock file left by nobody goes too: its bytes are freed with the entry
    try:
        fd = try_lock(lock, wait=False)
    except OSError as e:
        return 0, f"its lock cannot be taken ({e.strerror})"
    if fd is None:
        return 0, f"in use by {holder(lock)}"
    try:
        st = os.lstat(entry.path)   # it may have gone, or been replaced by a link, since it was listed
        if stat.S_ISLNK(st.st_mode):
            return 0, "it became a symbolic link"
        freed = _freed_by(entry.path) + (_freed_by(lock) if had_lock else 0)
        if stat.S_ISDIR(st.st_mode):
            aside = Path(tempfile.mkdtemp(prefix=f".{owner}.old-", dir=entry.path.parent))
            os.replace(entry.path, aside / entry.path.name)
            shutil.rmtree(aside)
        else:
            entry.path.unlink()
        return freed, None
    except FileNotFoundError:
        return 0, "it was removed meanwhile"
    except OSError as e:   # what was moved aside stays there, listed as a leftover, removed by the next prune
        return 0, f"it could not be removed ({e.strerror})"
    finally:
        lock.unlink(missing_ok=True)   # as compress.paths.locked lets a lock go: the file first, then the lock
        os.close(fd)


def _apply(inv: Inventory, chosen: list[Entry], now: float) -> Removal:
    removed, skipped, freed = [], [], 0
    for entry in chosen:
        if entry.in_use:
            skipped.append(entry)
            continue
        bytes_freed, why = _remove(entry, inv.root, now)
        if why is None:
            removed.append(entry)
            freed += bytes_freed
        else:
            skipped.append(replace(entry, in_use=why))
    return Removal(inv.root, removed, freed, skipped, inv.others)


def choose(inv: Inventory, rule: PruneRule, now: float) -> list[Entry]:
    """The entries ``rule`` removes from ``inv`` (in use or not: those in use are then skipped), oldest first.
    Leftovers of killed processes are always chosen."""
    chosen = {e.path: e for e in inv.entries if e.leftover}
    if rule.older_than is not None:
        chosen |= {e.path: e for e in inv.entries if e.age(now) > rule.older_than}
    if rule.keep_last is not None:
        for kind in KINDS:
            newest_first = [e for e in inv.entries if e.kind == kind and not e.leftover]
            chosen |= {e.path: e for e in newest_first[rule.keep_last:]}
    if rule.max_size is not None:
        size = inv.total - sum(e.size for e in chosen.values() if not e.in_use)
        for entry in sorted(inv.entries, key=lambda e: e.modified):
            if size <= rule.max_size:
                break
            if entry.path not in chosen and not entry.in_use:
                chosen[entry.path] = entry
                size -= entry.size
    return sorted(chosen.values(), key=lambda e: e.modified)


def prune(rule: PruneRule, root: Path | None = None, now: float | None = None) -> Removal:
    """Remove the entries ``rule`` chooses (see :func:`choose`) from the cache root, never one in use."""
    now = time.time() if now is None else now
    inv = inventory(root, now)
    done = _apply(inv, choose(inv, rule, now), now)
    left = inv.total - done.freed   # after the removal: an entry that came into use meanwhile stayed
    if rule.max_size is not None and left > rule.max_size:
        done = replace(done, unmet=f"the cache stays at {human_size(left)}, over --max-size "
                                   f"{human_size(rule.max_size)}: what is left is in use, other than compress's, or the "
                                   "folders themselves")
    return done


def clear(root: Path | None = None, now: float | None = None) -> Removal:
    """Remove every entry of the cache root that is not in use (others stay, and are named)."""
    now = time.time() if now is None else now
    inv = inventory(root, now)
    return _apply(inv, sorted(inv.entries, key=lambda e: e.modified), now)
