"""Vocabulary pruning (TextPruner's idea): keep only the tokens a task's text uses.

A BERT vocabulary holds 30522 WordPiece tokens, but one task's training text uses a few thousand of
them: the other rows of the V x E token-embedding table are never read while fine-tuning. Pruning
keeps the used ids plus every special token of the tokenizer, shrinks the table to V' x E (the kept
rows, in ascending old id order) and rebuilds the tokenizer with the same tokens renumbered
0..V'-1, so the pruned model reads the pruned tokenizer's ids exactly as the full model read the
full tokenizer's ids.

Why the tokenizations agree: WordPiece splits a word greedily, longest known piece first. Every
piece of a word the kept text used is kept, and no longer piece was in the full vocabulary (it would
have been chosen), so the pruned vocabulary splits that word the same way. A word the kept text
never used may have lost pieces: it then splits into other, shorter kept pieces, or becomes [UNK]
when no split is left. That is what happens to test text with words the training text never used;
it is the accuracy the method trades for the smaller table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

import torch

from compress.errors import CompressError
from compress.models.encoder import Encoder

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
BATCH = 1024
# Constructor arguments that describe the old vocabulary or where it was read from: the pruned
# tokenizer gets its vocabulary from the rebuilt backend instead.
_OLD_VOCABULARY_KWARGS = frozenset({
    "vocab", "vocab_file", "merges", "merges_file", "tokenizer_file", "tokenizer_object",
    "added_tokens_decoder", "name_or_path", "is_local", "local_files_only",
})


# --- which ids a task uses --------------------------------------------------------------------
def _batches(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def used_token_ids(
    tokenizer: PreTrainedTokenizerBase, texts: Iterable[str], text_pairs: Iterable[str] | None = None
) -> list[int]:
    """The sorted ids that tokenizing ``texts`` (with ``text_pairs``, one per text) produces, with
    every special id of the tokenizer added. Nothing is truncated: a token past the model's length
    limit is still one the text uses."""
    used = set(tokenizer.all_special_ids)
    rows = zip(texts, text_pairs, strict=True) if text_pairs is not None else ((t, None) for t in texts)
    for batch in _batches(rows, BATCH):
        first = [text for text, _ in batch]
        second = [pair for _, pair in batch] if text_pairs is not None else None
        encoded = tokenizer(first, second, truncation=False, padding=False, return_attention_mask=False,
                            return_token_type_ids=False, verbose=False)
        for ids in encoded["input_ids"]:
            used.update(ids)
    return sorted(used)


def old_to_new(keep_ids: Iterable[int]) -> dict[int, int]:
    """Old id -> new id: the kept ids in ascending order become 0..V'-1."""
    return {old: new for new, old in enumerate(sorted(keep_ids))}


def check_keep(tokenizer: PreTrainedTokenizerBase, keep_ids: Sequence[int], vocab_size: int) -> None:
    """Raise :class:`CompressError` (one sentence) unless ``keep_ids`` is a usable set of ids to keep:
    not empty, no id twice, every id below ``vocab_size``, every special token of the tokenizer kept."""
    if len(keep_ids) == 0:
        raise CompressError("the list of token ids to keep is empty; keep at least the tokenizer's special tokens.")
    seen: set[int] = set()
    for token_id in keep_ids:
        if token_id in seen:
            raise CompressError(f"token id {token_id} is listed twice among the ids to keep; list each id once.")
        seen.add(token_id)
        if not 0 <= token_id < vocab_size:
            raise CompressError(f"token id {token_id} is outside the vocabulary of {vocab_size} tokens; "
                                f"keep only ids from 0 to {vocab_size - 1}.")
    for token_id in sorted(tokenizer.all_special_ids):
        if token_id not in seen:
            token = tokenizer.convert_ids_to_tokens(token_id)
            raise CompressError(f"the vocabulary would lose the special token {token} (id {token_id}); keep it.")


# --- the pruned model and tokenizer ---------------------------------------------------------------
def prune_vocabulary(
    model: Encoder, tokenizer: PreTrainedTokenizerBase, keep_ids: Sequence[int]
) -> tuple[Encoder, PreTrainedTokenizerBase]:
    """A new encoder and a new tokenizer that know only the tokens ``keep_ids`` (the inputs are untouched).

    The encoder's token-embedding table holds the kept rows in ascending old id order
    (``vocab_size`` = len(keep_ids), ``pad_token_id`` renumbered); every other weight is copied
    exactly. The tokenizer has the same tokens renumbered 0..V'-1 in that order, so for text made
    of words whose pieces were all kept, its ids are the old ids mapped by :func:`old_to_new`.
    Text with other words still tokenizes: a word whose pieces were removed splits into other kept
    pieces or becomes [UNK] (see the module docstring). Only WordPiece (BERT) tokenizers are supported.
    """
    config = model.config
    check_keep(tokenizer, keep_ids, config.vocab_size)
    if config.pad_token_id not in set(keep_ids):
        raise CompressError(f"the vocabulary would lose the model's padding token (id {config.pad_token_id}); "
                            "keep it.")
    keep = sorted(keep_ids)
    new_tokenizer = pruned_tokenizer(tokenizer, keep)
    return _pruned_encoder(model, keep), new_tokenizer


def _pruned_encoder(model: Encoder, keep: list[int]) -> Encoder:
    """A new encoder whose token-embedding rows are ``keep`` (ascending) and whose other weights are copies."""
    config = model.config.replace(vocab_size=len(keep), pad_token_id=old_to_new(keep)[model.config.pad_token_id])
    state = model.state_dict()
    table = state[WORD_EMBEDDINGS]
    state[WORD_EMBEDDINGS] = table.index_select(0, torch.tensor(keep, device=table.device))
    pruned = Encoder.holding(config, state, table.device, table.dtype)  # every other weight has a place, and a copy
    frozen = {name for name, p in model.named_parameters() if not p.requires_grad}
    for name, parameter in pruned.named_parameters():
        parameter.requires_grad_(name not in frozen)
    return pruned.train(model.training)


def pruned_tokenizer(tokenizer: PreTrainedTokenizerBase, keep_ids: Sequence[int]) -> PreTrainedTokenizerBase:
    """A new fast tokenizer of the same class whose vocabulary is the kept tokens renumbered 0..V'-1
    (ascending old id order); normalizer, pre-tokenizer and settings are the input's.

    It is rebuilt from the backend's ``tokenizers`` JSON: the WordPiece vocabulary, the added
    (special) tokens, the post-processor's [CLS]/[SEP] ids and the padding id are renumbered.
    """
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    kind = (spec.get("model") or {}).get("type")
    if kind != "WordPiece":
        raise CompressError(f"vocabulary pruning supports WordPiece (BERT) tokenizers only, and this one is "
                            f"{kind or 'of an unknown kind'}; use a BERT-family teacher.")
    mapping = old_to_new(keep_ids)
    new_ids = _renumber_tokens(spec, mapping)
    spec["post_processor"] = _renumber_processor(spec.get("post_processor"), new_ids)
    if spec.get("padding"):
        spec["padding"]["pad_id"] = _new_id(new_ids, spec["padding"]["pad_token"])
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(json.dumps(spec))
    kwargs = {k: v for k, v in tokenizer.init_kwargs.items() if k not in _OLD_VOCABULARY_KWARGS}
    kwargs["model_max_length"] = tokenizer.model_max_length
    return type(tokenizer)(tokenizer_object=backend, **kwargs)


def _renumber_tokens(spec: dict[str, Any], mapping: dict[int, int]) -> dict[str, int]:
    """Keep only the mapped tokens of the WordPiece vocabulary and the added tokens, renumbered in
    place; returns token -> new id."""
    vocab: dict[str, int] = spec["model"]["vocab"]
    tokens = {token_id: token for token, token_id in vocab.items()}
    tokens |= {added["id"]: added["content"] for added in spec.get("added_tokens", [])}
    missing = [token_id for token_id in mapping if token_id not in tokens]
    if missing:
        raise CompressError(f"token id {missing[0]} has no token in the tokenizer; keep only ids the tokenizer has.")
    new_ids = {tokens[old]: new for old, new in mapping.items()}
    spec["model"]["vocab"] = {tokens[old]: new for old, new in mapping.items() if tokens[old] in vocab}
    spec["added_tokens"] = [added | {"id": mapping[added["id"]]}
                            for added in spec.get("added_tokens", []) if added["id"] in mapping]
    return new_ids


def _new_id(new_ids: dict[str, int], token: str) -> int:
    if token not in new_ids:
        raise CompressError(f"the vocabulary would lose the special token {token}, which the tokenizer adds "
                            "to every sequence; keep it.")
    return new_ids[token]


def _renumber_processor(processor: dict[str, Any] | None, new_ids: dict[str, int]) -> dict[str, Any] | None:
    """The post-processor with the ids of the special tokens it inserts renumbered."""
    if processor is None:
        return None
    kind = processor.get("type")
    if kind == "TemplateProcessing":
        for special in processor["special_tokens"].values():
            special["ids"] = [_new_id(new_ids, token) for token in special["tokens"]]
    elif kind in ("BertProcessing", "RobertaProcessing"):
        for role in ("cls", "sep"):
            token = processor[role][0]
            processor[role] = [token, _new_id(new_ids, token)]
    elif kind == "Sequence":
        processor["processors"] = [_renumber_processor(p, new_ids) for p in processor["processors"]]
    return processor


# --- what it saves ------------------------------------------------------------------------------
@dataclass(frozen=True)
class VocabPruneSummary:
    """How much of the vocabulary and of the token-embedding table pruning removes."""

    vocab_size: int           # V before
    kept: int                 # V' after
    embedding_size: int       # E

    @property
    def removed(self) -> int:
        return self.vocab_size - self.kept

    @property
    def share_removed(self) -> float:
        return self.removed / self.vocab_size

    @property
    def embedding_params_before(self) -> int:
        return self.vocab_size * self.embedding_size

    @property
    def embedding_params_after(self) -> int:
        return self.kept * self.embedding_size


def vocab_summary(vocab_size: int, keep_ids: Sequence[int], embedding_size: int) -> VocabPruneSummary:
    """Tokens kept and removed, and the V x E token-embedding parameters before and after."""
    return VocabPruneSummary(vocab_size=vocab_size, kept=len(set(keep_ids)), embedding_size=embedding_size)
