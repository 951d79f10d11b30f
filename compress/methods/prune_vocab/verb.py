"""`compress run prune-vocab`: keep only the tokens the task's training text uses (TextPruner's vocabulary
pruning), renumber them, and save a tokenizer that produces the new ids.

Run directory: config.json, student/ (encoder + the pruned tokenizer), metrics.json with a ``pruning``
block (tokens kept and removed, embedding parameters before and after, test sentences tokenized
differently), report.md. Accuracy is measured with the pruned tokenizer on the test split.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

from compress.data.batching import tokenize_task
from compress.data.task import TaskData
from compress.device import resolve_device
from compress.errors import CompressError
from compress.prune.options import VocabOptions
from compress.prune.vocab import check_keep, old_to_new, prune_vocabulary, used_token_ids, vocab_summary
from compress.runs.config import RunConfig, RunResult, run_directory
from compress.runs.pruning import write_pruned_run
from compress.runs.source import Source, claimed_source
from compress.teachers.registry import load_tokenizer

SPLITS = ("train", "all")


def check_vocab_pruning(config: RunConfig, options: VocabOptions) -> None:
    """Every check that needs no data."""
    if config.epochs or config.lr or config.layer_map or config.patience:
        raise CompressError("prune-vocab trains nothing: --epochs, --lr, --layer-map and --patience do not apply.")
    if options.vocab_from not in SPLITS:
        raise CompressError(f"--vocab-from must be one of {', '.join(SPLITS)}, got {options.vocab_from!r}.")
    if config.target != "teacher" and not Path(config.target).is_dir():
        raise CompressError(f"--target must be 'teacher' or a run directory; {config.target!r} is neither.")


def vocab_prune_run(config: RunConfig, options: VocabOptions, show_progress: bool = True,
                    pipeline: str | None = None) -> RunResult:
    """Prune the vocabulary of ``config.target`` (the teacher or a run directory) and write a run directory."""
    check_vocab_pruning(config, options)
    with claimed_source(config, show_progress) as (config, source, out):
        return _prune_vocab(config, options, source, out, pipeline)


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


def _prune_vocab(config: RunConfig, options: VocabOptions, source: Source, out: Path,
                 pipeline: str | None) -> RunResult:
    start = time.perf_counter()
    tokenizer = load_tokenizer(str(source.directory))
    keep = used_token_ids(tokenizer, *vocab_texts(source.task, options.vocab_from))
    check_keep(tokenizer, keep, source.model.config.vocab_size)
    model, new_tokenizer = prune_vocabulary(source.model, tokenizer, keep)
    data = tokenize_task(source.task, new_tokenizer, max_length=source.data.max_length)
    model = model.to(resolve_device(config.device)).eval()
    summary = vocab_summary(source.model.config.vocab_size, keep, source.model.config.embedding_size)
    mapping = old_to_new(keep)
    old_test, new_test = source.data.splits["test"]["input_ids"], data.splits["test"]["input_ids"]
    changed = sum(list(new) != [mapping.get(i, -1) for i in old] for old, new in zip(old_test, new_test, strict=True))
    pruning = {"options": asdict(options), "source_config": source.model.config.to_dict(),
               "vocabulary": {**asdict(summary), "removed": summary.removed, "share_removed": summary.share_removed,
                              "embedding_params_before": summary.embedding_params_before,
                              "embedding_params_after": summary.embedding_params_after,
                              "test_sentences": len(old_test), "test_sentences_tokenized_differently": changed}}
    with run_directory(out) as tmp:
        record = write_pruned_run(tmp, out, config, source, model, data, new_tokenizer, method="prune-vocab",
                                  stages=[], pruning=pruning, extra_config={"options": asdict(options)},
                                  seconds=time.perf_counter() - start, pipeline=pipeline)
    return RunResult(out, record)
