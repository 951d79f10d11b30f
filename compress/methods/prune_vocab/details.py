"""What a vocabulary-pruning run records of its own (metrics.json's ``details``; schema 3's ``pruning`` block)."""

from __future__ import annotations

from dataclasses import dataclass

from compress.methods.prune_vocab.options import VocabOptions
from compress.models.config import EncoderConfigData  # a field's type: Details.from_dict resolves it
from compress.registry import Details


@dataclass
class VocabularyCounts:
    """Tokens kept and removed, the V x E token-embedding parameters before and after, and how many test
    sentences the pruned tokenizer splits differently (where any accuracy change comes from)."""

    vocab_size: int
    kept: int
    embedding_size: int
    removed: int
    share_removed: float
    embedding_params_before: int
    embedding_params_after: int
    test_sentences: int
    test_sentences_tokenized_differently: int


@dataclass
class VocabDetails(Details):
    options: VocabOptions
    source_config: EncoderConfigData
    vocabulary: VocabularyCounts
