"""MR: the movie-review sentence polarity dataset (Pang & Lee 2005), from the VADER sdist.

The sentences ship in the PyPI sdist ``vaderSentiment==3.3.2``, inside the inner archive
``additional_resources/hutto_ICWSM_2014.tar.gz``, as
``hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt``: UTF-8, CRLF line ends, one
``id<TAB>mean_score<TAB>text`` per line. Ids 1-5152 are the positive and 5153-10312 the
negative sentences of the original MR release; ids above 10312 are extra snippets of mixed
polarity that are not part of MR and are dropped. For ``mr`` the label is the original MR
polarity and the VADER score is ignored; ``mr-score`` is the regression task on the same
sentences: the target is the VADER mean human score (-4 to +4, the mean of the raters' scores of
Hutto & Gilbert 2014). ``mr-unbalanced`` is MR with five negatives in six dropped (every sixth negative id kept):
a two-class task where one class is rare, on which accuracy, F1 and Matthews correlation disagree. This is the sentence set SST was built from; it is MR, not SST-2, and it
has no official split (compress uses its fixed stratified split).
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from compress.data.sources import PinnedArchive
from compress.data.values import number
from compress.errors import CompressError

ARCHIVE = PinnedArchive(
    package="vaderSentiment",
    version="3.3.2",
    filename="vaderSentiment-3.3.2.tar.gz",
    sha256="5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9",
    kind="sdist",
)
INNER_ARCHIVE = "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
MEMBER = "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"
FILE = "movieReviewSnippets_GroundTruth.txt"

LABEL_NAMES = ["negative", "positive"]
LAST_POSITIVE_ID = 5152
LAST_MR_ID = 10312
SIZE = LAST_MR_ID
LABEL_SOURCE = (
    "original MR polarity by id: ids 1-5152 positive, 5153-10312 negative "
    "(ids above 10312 are extra VADER snippets, dropped)"
)


def extract(archive_path: Path, dest: Path) -> None:
    """Write ``movieReviewSnippets_GroundTruth.txt`` from the sdist (a tar inside a tar) to ``dest``."""
    with tarfile.open(archive_path, "r:gz") as outer:
        inner_file = outer.extractfile(INNER_ARCHIVE)
        if inner_file is None:
            raise KeyError(INNER_ARCHIVE)
        with tarfile.open(fileobj=inner_file, mode="r:gz") as inner:
            member = inner.extractfile(MEMBER)
            if member is None:
                raise KeyError(MEMBER)
            (dest / FILE).write_bytes(member.read())


SCORE_SOURCE = ("the VADER mean human sentiment score of each MR sentence, -4 (most negative) to +4 (most positive), "
                "column 2 of the file (Hutto & Gilbert 2014)")


def read(files_dir: Path) -> tuple[list[str], list[str], list[int]]:
    """Parse the extracted file into ``(ids, texts, labels)`` for MR ids 1-10312 only.

    Labels: 1 (positive) for ids up to 5152, else 0 (negative).
    """
    ids, texts, _ = read_scores(files_dir)
    return ids, texts, [1 if int(example_id) <= LAST_POSITIVE_ID else 0 for example_id in ids]


UNBALANCED_KEEP_EVERY = 6   # mr-unbalanced keeps negative ids 5153, 5159, ...: 860 of 5,160
UNBALANCED_SIZE = LAST_POSITIVE_ID + (LAST_MR_ID - LAST_POSITIVE_ID + UNBALANCED_KEEP_EVERY - 1) // UNBALANCED_KEEP_EVERY
UNBALANCED_SOURCE = LABEL_SOURCE + (f"; only every {UNBALANCED_KEEP_EVERY}th negative id kept (5153, 5159, ...), so "
                                    "one sentence in seven is negative in every split")


def read_unbalanced(files_dir: Path) -> tuple[list[str], list[str], list[int]]:
    """MR with most negatives dropped: every positive sentence and every sixth negative one, by id, so the split
    (stratified as for MR) has the same rare negative share in train, dev and test."""
    kept = [(i, t, label) for i, t, label in zip(*read(files_dir), strict=True)
            if label == 1 or (int(i) - LAST_POSITIVE_ID - 1) % UNBALANCED_KEEP_EVERY == 0]
    return [i for i, _, _ in kept], [t for _, t, _ in kept], [label for _, _, label in kept]


def read_scores(files_dir: Path) -> tuple[list[str], list[str], list[float]]:
    """Parse the extracted file into ``(ids, texts, scores)`` for MR ids 1-10312 only: each sentence's mean human
    score, the target of the ``mr-score`` regression task."""
    ids: list[str] = []
    texts: list[str] = []
    scores: list[float] = []
    content = (files_dir / FILE).read_text(encoding="utf-8")
    for line_number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t", 2)
        score = number(fields[1]) if len(fields) == 3 else None
        if score is None or not fields[0].strip().isdigit():
            raise CompressError(
                f"line {line_number} of the MR file from {ARCHIVE.filename} is not "
                "'id<TAB>score<TAB>text'; the pinned archive may have changed upstream, please report it."
            )
        example_id = int(fields[0])
        if example_id > LAST_MR_ID:
            continue
        ids.append(str(example_id))
        texts.append(fields[2].strip())
        scores.append(score)
    if len(ids) != SIZE:
        raise CompressError(
            f"the cached MR file holds {len(ids)} sentences with ids 1-{LAST_MR_ID} instead of "
            f"{SIZE}; the pinned archive may have changed upstream, please report it."
        )
    return ids, texts, scores
