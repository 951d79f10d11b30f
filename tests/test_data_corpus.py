"""Raw-text corpus helpers: the sentence splitter and the SOP / NSP pair makers."""

from __future__ import annotations

import pytest

from compress.data import Document, make_nsp_pairs, make_sop_pairs, split_sentences
from compress.errors import CompressError


def documents(n_docs: int = 40, n_sentences: int = 11) -> list[Document]:
    return [
        Document(id=f"d{d}", title=f"title {d}", sentences=tuple(f"doc {d} sentence {s}." for s in range(n_sentences)))
        for d in range(n_docs)
    ]


def position(sentence: str) -> tuple[int, int]:
    """``"doc 3 sentence 7."`` -> ``(3, 7)``."""
    words = sentence.rstrip(".").split()
    return int(words[1]), int(words[3])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It rose 2.5% to $1.13bn. Analysts were surprised!", ["It rose 2.5% to $1.13bn.", "Analysts were surprised!"]),
        (
            "Mr. Smith met Dr. Jones in St. Albans. They talked.",
            ["Mr. Smith met Dr. Jones in St. Albans.", "They talked."],
        ),
        ('He said: "We will win." Then he left?', ['He said: "We will win."', "Then he left?"]),
        (
            "J. K. Rowling visited the U.S. on Monday. Fans queued.",
            ["J. K. Rowling visited the U.S. on Monday.", "Fans queued."],
        ),
        (
            "First paragraph ends\nSecond one. and lower case stays",
            ["First paragraph ends", "Second one. and lower case stays"],
        ),
        ("Sales hit £5m. 2005 was better.", ["Sales hit £5m.", "2005 was better."]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_sop_pairs_are_consecutive_segments_in_order_or_swapped() -> None:
    pairs = make_sop_pairs(documents())
    assert len(pairs) == 40 * 5  # 11 sentences -> 5 non-overlapping pairs per document
    assert pairs.features["label"].names == ["in_order", "swapped"]
    for row in pairs:
        (doc_a, a), (doc_b, b) = position(row["text"]), position(row["text_pair"])
        assert doc_a == doc_b and row["id"].startswith(f"d{doc_a}#")
        assert b - a == (1 if row["label"] == 0 else -1)
    assert 0.4 < sum(pairs["label"]) / len(pairs) < 0.6


def test_sop_pairs_are_seeded() -> None:
    docs = documents()
    assert make_sop_pairs(docs)["label"] == make_sop_pairs(docs)["label"]
    assert make_sop_pairs(docs, seed=1)["label"] != make_sop_pairs(docs, seed=2)["label"]


def test_sop_segments_can_hold_several_sentences() -> None:
    pairs = make_sop_pairs(documents(n_docs=2, n_sentences=8), sentences_per_segment=2)
    assert len(pairs) == 4
    row = pairs[0]
    first, second = (row["text"], row["text_pair"]) if row["label"] == 0 else (row["text_pair"], row["text"])
    assert [position(s + ".")[1] for s in first.rstrip(".").split(". ")] == [0, 1]
    assert [position(s + ".")[1] for s in second.rstrip(".").split(". ")] == [2, 3]


def test_nsp_pairs_are_true_next_or_from_another_document() -> None:
    pairs = make_nsp_pairs(documents())
    assert pairs.features["label"].names == ["is_next", "not_next"]
    for row in pairs:
        (doc_a, a), (doc_b, b) = position(row["text"]), position(row["text_pair"])
        if row["label"] == 0:
            assert (doc_b, b) == (doc_a, a + 1)
        else:
            assert doc_b != doc_a
    assert 0.4 < sum(pairs["label"]) / len(pairs) < 0.6
    assert make_nsp_pairs(documents(), seed=5)["text_pair"] == make_nsp_pairs(documents(), seed=5)["text_pair"]


def test_pair_makers_refuse_documents_they_cannot_use() -> None:
    with pytest.raises(CompressError, match="at least two documents"):
        make_nsp_pairs(documents(n_docs=1))
    with pytest.raises(CompressError, match="no two consecutive segments"):
        make_sop_pairs(documents(n_sentences=1))
