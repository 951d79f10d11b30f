"""Raw text for general distillation and pre-training objectives: documents of ordered sentences.

The corpus is the BBC News articles (:mod:`compress.data.bbc`): each article is a
:class:`Document` whose sentences keep their order. From documents, two pair makers build the
inputs of ALBERT's and BERT's inter-sentence objectives, as a :class:`datasets.Dataset` with
columns ``id``, ``text``, ``text_pair``, ``label`` (ready for
:func:`compress.data.batching.tokenize_dataset`):

* :func:`make_sop_pairs`, sentence-order prediction (ALBERT): two consecutive segments of one
  document, label 0 when in order, 1 when swapped, each with probability 1/2.
* :func:`make_nsp_pairs`, next-sentence prediction (BERT): a segment followed by the true next
  segment (label 0, "is next") or by a random segment of another document (label 1), each
  with probability 1/2.

Both are deterministic given ``seed``. Pairs within a document do not overlap: segments
``(0, 1), (2, 3), ...`` (with ``sentences_per_segment`` sentences in each segment).

Sentence splitter (:func:`split_sentences`): text is cut into lines (BBC paragraphs are
lines), and a line is cut after ``.``, ``!`` or ``?`` (plus closing quotes or brackets) that is
followed by whitespace and then an upper-case letter, a digit or an opening quote -- unless the
word before the full stop is a common abbreviation (``Mr``, ``Dr``, ``St``, ``Inc``, ...), a
single letter (an initial, as in ``J. K. Rowling``) or a dotted abbreviation (``U.S.``); a
word glued to a number (``£5m.``) is not an abbreviation. Simple and predictable rather
than linguistically complete.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np

from compress.data import bbc
from compress.data.named import get_named
from compress.errors import CompressError

PAIR_SEED: int = 17
"""Default seed of the SOP/NSP pair makers."""

SOP_LABEL_NAMES = ["in_order", "swapped"]
NSP_LABEL_NAMES = ["is_next", "not_next"]

ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st sr jr gen gov sen rep lt col sgt capt cpl rev hon "
    "inc ltd co corp plc bros vs etc approx dept jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
"""Words after which a full stop does not end a sentence (compared lower-case, without dots)."""

_BOUNDARY = re.compile(r"([.!?]+[\"'\u2019\u201d)\]]*)\s+(?=[\"'\u2018\u201c(\[]?[A-Z0-9£$])")
_LAST_WORD = re.compile(r"(?:^|[^\w])([A-Za-z][A-Za-z.]*)$")

CORPORA = ("bbc-news",)


@dataclass(frozen=True)
class Document:
    """One document of a raw-text corpus.

    Attributes:
        id: stable id (for BBC: ``<topic>/<NNN>``).
        title: the title (not part of ``sentences``).
        sentences: the body's sentences, in order.
    """

    id: str
    title: str
    sentences: tuple[str, ...]

    @property
    def text(self) -> str:
        """The body as one string (sentences joined by spaces)."""
        return " ".join(self.sentences)


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences with the simple rules of the module docstring."""
    sentences: list[str] = []
    for line in text.splitlines():
        start = 0
        for match in _BOUNDARY.finditer(line):
            end = match.end(1)
            if match.group(1).startswith(".") and _is_abbreviation(line[start : match.start(1)]):
                continue
            sentence = line[start:end].strip()
            if sentence:
                sentences.append(sentence)
            start = match.end()
        tail = line[start:].strip()
        if tail:
            sentences.append(tail)
    return sentences


def _is_abbreviation(before: str) -> bool:
    match = _LAST_WORD.search(before)
    if not match:
        return False
    word = match.group(1)
    bare = word.replace(".", "").lower()
    return len(bare) == 1 or bare in ABBREVIATIONS or "." in word


def check_corpus(name: str) -> None:
    """Refuse, without fetching anything, a corpus that is neither a known name nor a file."""
    if name not in CORPORA and not Path(name).is_file():
        raise CompressError(f"unknown corpus '{name}': neither a known corpus ({', '.join(CORPORA)}) nor a "
                            "text file of documents separated by blank lines.")


def load_corpus(name: str = "bbc-news") -> list[Document]:
    """The documents of a raw-text corpus, sentences split: a named corpus (only ``bbc-news`` so far; its
    archive is fetched and verified like the named dataset of the same name) or a UTF-8 text file of
    documents separated by blank lines."""
    check_corpus(name)
    if name not in CORPORA:
        return _file_documents(Path(name))
    articles = bbc.read_articles(get_named(name).files_dir())
    return [Document(id=a.id, title=a.title, sentences=tuple(split_sentences(a.body))) for a in articles]


def _file_documents(path: Path) -> list[Document]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CompressError(f"cannot read the corpus {path}: {e}") from None
    documents = [Document(id=f"{path.stem}/{i}", title="", sentences=tuple(split_sentences(block)))
                 for i, block in enumerate(b for b in re.split(r"\n\s*\n", text) if b.strip())]
    if not documents:
        raise CompressError(f"the corpus {path} holds no text.")
    return documents


def _segments(document: Document, size: int) -> list[tuple[int, str, str]]:
    """Non-overlapping consecutive segment pairs ``(start, first, second)`` of one document."""
    s = document.sentences
    return [
        (i, " ".join(s[i : i + size]), " ".join(s[i + size : i + 2 * size]))
        for i in range(0, len(s) - 2 * size + 1, 2 * size)
    ]


def _pairs_dataset(
    ids: list[str], first: list[str], second: list[str], labels: list[int], names: list[str]
) -> datasets.Dataset:
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "text": datasets.Value("string"),
            "text_pair": datasets.Value("string"),
            "label": datasets.ClassLabel(names=names),
        }
    )
    return datasets.Dataset.from_dict(
        {"id": ids, "text": first, "text_pair": second, "label": labels}, features=features
    )


def make_sop_pairs(
    documents: Sequence[Document], *, seed: int = PAIR_SEED, sentences_per_segment: int = 1
) -> datasets.Dataset:
    """Sentence-order pairs: label 0 = segments in order, 1 = swapped (probability 1/2, seeded).

    Returns:
        columns ``id`` (``<doc id>#<first sentence index>``), ``text``, ``text_pair``, ``label``
        (ClassLabel ``in_order``/``swapped``).
    """
    if sentences_per_segment < 1:
        raise CompressError(f"sentences_per_segment must be at least 1, not {sentences_per_segment}.")
    rng = np.random.default_rng(seed)
    ids, first, second, labels = [], [], [], []
    for document in documents:
        for start, a, b in _segments(document, sentences_per_segment):
            swap = bool(rng.random() < 0.5)
            ids.append(f"{document.id}#{start}")
            first.append(b if swap else a)
            second.append(a if swap else b)
            labels.append(int(swap))
    if not ids:
        raise CompressError("the documents have no two consecutive segments to pair; give longer documents.")
    return _pairs_dataset(ids, first, second, labels, SOP_LABEL_NAMES)


def make_nsp_pairs(
    documents: Sequence[Document], *, seed: int = PAIR_SEED, sentences_per_segment: int = 1
) -> datasets.Dataset:
    """Next-sentence pairs: label 0 = the true next segment, 1 = a random segment of another document.

    Each pair is a true next pair with probability 1/2 (seeded); otherwise the second segment
    is ``sentences_per_segment`` consecutive sentences at a random position of a random other
    document.

    Returns:
        columns ``id``, ``text``, ``text_pair``, ``label`` (ClassLabel ``is_next``/``not_next``).
    """
    if sentences_per_segment < 1:
        raise CompressError(f"sentences_per_segment must be at least 1, not {sentences_per_segment}.")
    usable = [i for i, d in enumerate(documents) if len(d.sentences) >= sentences_per_segment]
    if len(usable) < 2:
        raise CompressError("next-sentence pairs need at least two documents with sentences; give more documents.")
    rng = np.random.default_rng(seed)
    ids, first, second, labels = [], [], [], []
    for index, document in enumerate(documents):
        for start, a, b in _segments(document, sentences_per_segment):
            if rng.random() < 0.5:
                second.append(b)
                labels.append(0)
            else:
                other = index
                while other == index:
                    other = usable[int(rng.integers(len(usable)))]
                sentences = documents[other].sentences
                at = int(rng.integers(len(sentences) - sentences_per_segment + 1))
                second.append(" ".join(sentences[at : at + sentences_per_segment]))
                labels.append(1)
            ids.append(f"{document.id}#{start}")
            first.append(a)
    if not ids:
        raise CompressError("the documents have no two consecutive segments to pair; give longer documents.")
    return _pairs_dataset(ids, first, second, labels, NSP_LABEL_NAMES)
