"""What a vocabulary-pruning run shows of its own: its summary line and its section of report.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

from compress.methods.prune_vocab.details import VocabDetails
from compress.reports.records import score_text

if TYPE_CHECKING:
    from compress.reports.records import RunRecord


def summary_lines(record: RunRecord) -> list[str]:
    v = record.details.vocabulary  # type: ignore[union-attr]
    return [f"kept {v.kept:,} of {v.vocab_size:,} tokens; {v.test_sentences_tokenized_differently} of "
            f"{v.test_sentences} test sentences tokenized differently"]


def report_lines(record: RunRecord) -> list[str]:
    details: VocabDetails = record.details  # type: ignore[assignment]
    v, source = details.vocabulary, record.source
    what = "the fine-tuned teacher" if source.kind == "teacher" else f"the student of `{source.parent}`"
    text = "training split uses" if details.options.vocab_from == "train" else "train, dev and test splits use"
    return [
        "## Vocabulary pruning", "",
        f"Pruned: {what} (test {score_text(source)}). The {text} {v.kept:,} of the "
        f"{v.vocab_size:,} tokens (special tokens included); the other {v.removed:,} ({v.share_removed:.1%}) "
        f"are gone, and with them {v.embedding_params_before - v.embedding_params_after:,} of the "
        f"{v.embedding_params_before:,} token-embedding parameters (V x E, E = {v.embedding_size}).", "",
        f"The saved tokenizer numbers the kept tokens 0..{v.kept - 1}. A word whose pieces were all removed "
        f"splits into other kept pieces or becomes [UNK]: {v.test_sentences_tokenized_differently} of the "
        f"{v.test_sentences} test sentences are tokenized differently than before, which is where any "
        "accuracy change comes from. Layers, FLOPs and speed are unchanged: a lookup in a smaller table "
        "costs the same.", "",
    ]
