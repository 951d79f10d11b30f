"""Vocabulary pruning's verb: keep only the tokens the task's text uses (TextPruner), renumber them, and give the
smaller model with a tokenizer that produces the new ids."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from compress.data.batching import tokenize_task
from compress.data.task import TaskData
from compress.errors import CompressError
from compress.methods.prune_vocab.details import VocabDetails, VocabularyCounts
from compress.methods.prune_vocab.options import VocabOptions
from compress.models.encoder import Encoder
from compress.prune.vocab import check_keep, old_to_new, prune_vocabulary, used_token_ids, vocab_summary
from compress.registry import Context, Transformed

SPLITS = ("train", "all")


def check_vocab_pruning(config: Any, options: VocabOptions) -> None:
    """Every check that needs no data."""
    if config.epochs or config.lr or config.layer_map or config.patience:
        raise CompressError("prune-vocab trains nothing: --epochs, --lr, --layer-map and --patience do not apply.")
    if options.vocab_from not in SPLITS:
        raise CompressError(f"--vocab-from must be one of {', '.join(SPLITS)}, got {options.vocab_from!r}.")


def vocab_texts(task: TaskData, vocab_from: str) -> tuple[list[str], list[str] | None]:
    """The texts (and text pairs) whose tokens are kept: the training split, or every split for ``all``
    (`compress explain prune-vocab` counts with this too)."""
    splits = ("train",) if vocab_from == "train" else tuple(task.splits)
    texts, pairs = [], []
    for name in splits:
        split = task.splits[name]
        texts += split["text"]
        if "text_pair" in split.column_names:
            pairs += split["text_pair"]
    return texts, pairs or None


def apply(model: Encoder, options: VocabOptions, context: Context) -> Transformed:
    """``model`` with the token-embedding rows of the tokens ``context.task``'s text uses under
    ``context.tokenizer``, and the renumbered tokenizer; ``context.data`` (the task under the old tokenizer)
    is compared with the new tokenization to count the test sentences that split differently."""
    if context.task is None or context.tokenizer is None or context.data is None:
        raise CompressError("prune-vocab needs the task, its tokenized data and the tokenizer (Context).")
    tokenizer = context.tokenizer
    keep = used_token_ids(tokenizer, *vocab_texts(context.task, options.vocab_from))
    check_keep(tokenizer, keep, model.config.vocab_size)
    pruned, new_tokenizer = prune_vocabulary(model, tokenizer, keep)
    data = tokenize_task(context.task, new_tokenizer, max_length=context.data.max_length)
    summary = vocab_summary(model.config.vocab_size, keep, model.config.embedding_size)
    mapping = old_to_new(keep)
    old_test, new_test = context.data.splits["test"]["input_ids"], data.splits["test"]["input_ids"]
    changed = sum(list(new) != [mapping.get(i, -1) for i in old] for old, new in zip(old_test, new_test, strict=True))
    details = VocabDetails(options=options, source_config=model.config.to_dict(), vocabulary=VocabularyCounts(
        **asdict(summary), removed=summary.removed, share_removed=summary.share_removed,
        embedding_params_before=summary.embedding_params_before, embedding_params_after=summary.embedding_params_after,
        test_sentences=len(old_test), test_sentences_tokenized_differently=changed))
    return Transformed(pruned.eval(), details, tokenizer=new_tokenizer)
