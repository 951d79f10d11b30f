"""Which directories compress wrote, decided by what they hold, never by their file names.

A directory compress writes for the user (a run, a comparison) gets a marker file, ``.compress.json``,
written by our writer alone: our format string, the kind of directory, every top-level entry the
writer put there and, for a run, the sha256 of its ``metrics.json``. A directory is ours to replace or
update only when its marker reads back, is of the kind asked for, every entry in the directory is one
the marker lists (or a temporary sibling of one, left by a killed write), and a run's metrics still
have the recorded digest. So a Hugging Face model directory (which has a ``config.json``), a decoy
holding empty ``metrics.json`` and ``config.json``, or one of our runs with a user's file added beside
it, is never ours: ``--overwrite`` and ``compress compare`` refuse it in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from compress.paths import atomic_write_text

MARKER = ".compress.json"
FORMAT = "compress-directory/1"
KINDS = ("run", "comparison", "export")


@dataclass
class Marker:
    kind: str                                            # "run" or "comparison"
    entries: list[str]                                   # the top-level names our writer put there
    digests: dict[str, str] = field(default_factory=dict)  # name -> sha256 of a top-level file
    format: str = FORMAT


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_marker(directory: Path) -> Marker | None:
    """The marker of ``directory``, or None when it has none or one that is not ours."""
    try:
        data = json.loads((Path(directory) / MARKER).read_text(encoding="utf-8"))
        marker = Marker(kind=data["kind"], entries=list(data["entries"]), digests=dict(data.get("digests") or {}),
                        format=data["format"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if marker.format != FORMAT or marker.kind not in KINDS or not all(isinstance(e, str) for e in marker.entries):
        return None
    return marker


def _write(directory: Path, marker: Marker) -> None:
    atomic_write_text(Path(directory) / MARKER, json.dumps(asdict(marker), indent=2, sort_keys=True) + "\n")


def mark_run(directory: Path) -> None:
    """Mark a finished run directory as ours: every entry it holds now, and its metrics' digest."""
    directory = Path(directory)
    entries = sorted(e for e in os.listdir(directory) if e != MARKER)
    metrics = directory / "metrics.json"
    digests = {"metrics.json": _sha256(metrics)} if metrics.is_file() else {}
    _write(directory, Marker("run", entries, digests))


def mark_export(directory: Path) -> None:
    """Mark a finished export folder (``compress export``) as ours: every entry it holds now."""
    _write(Path(directory), Marker("export", sorted(e for e in os.listdir(directory) if e != MARKER)))


def mark_comparison(directory: Path, entries: list[str]) -> None:
    """Mark ``directory`` as a comparison of ours that holds (or is about to hold) ``entries``, besides those
    its marker already lists; called before those entries are written, so the marker always covers them."""
    marker = read_marker(directory)
    known = marker.entries if marker is not None and marker.kind == "comparison" else []
    _write(directory, Marker("comparison", sorted({*known, *entries})))


def _leftover(name: str, entries: list[str]) -> bool:
    """A temporary file of one of our entries, left by a write that was killed (``.comparison.md.x1y2``)."""
    return any(name.startswith(f".{entry}.") for entry in entries)


def foreign(directory: Path, kind: str) -> str | None:
    """Why the existing directory ``directory`` is not a ``kind`` compress wrote, in a phrase that follows its
    path ("holds no marker of ours"), or None when it is one."""
    directory = Path(directory)
    marker = read_marker(directory)
    if marker is None:
        return f"holds no {MARKER} marker written by compress"
    if marker.kind != kind:
        return f"is a {marker.kind} of compress, not a {kind}"
    others = sorted(e for e in os.listdir(directory) if e != MARKER and e not in marker.entries
                    and not _leftover(e, marker.entries))
    if others:
        listed = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        return f"holds files compress did not write there ({listed})"
    for name, digest in marker.digests.items():
        path = directory / name
        if not path.is_file() or _sha256(path) != digest:
            return f"has a {name} that is not the one compress wrote"
    return None


def owned(directory: Path, kind: str) -> bool:
    """Whether ``directory`` is a ``kind`` directory compress wrote and nobody has added to since."""
    return Path(directory).is_dir() and foreign(directory, kind) is None
