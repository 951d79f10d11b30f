"""Vocabulary pruning (TextPruner): keep the token-embedding rows of the tokens the task's text uses.

The verb is :mod:`compress.methods.prune_vocab.verb`, on the engine :mod:`compress.prune.vocab` (ids, the
smaller table, the renumbered tokenizer).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compress.methods.prune_vocab.details import VocabDetails
from compress.methods.prune_vocab.options import VocabOptions
from compress.methods.prune_vocab.report import report_lines, summary_lines
from compress.models.config import EncoderConfig
from compress.registry import Context, Transform, Transformed, register

# What trains, measures or explains (torch) is imported in the functions that do it: the registry loads
# every method module for `compress --help`, which needs only names, options and sentences.
if TYPE_CHECKING:
    from compress.models.encoder import Encoder
    from compress.reports.footprint import Explanation
    from compress.runs.config import RunConfig

WHY = ("Vocabulary pruning shrinks the token-embedding table to the tokens the task uses: parameters fall by "
       "{params:.2f}x and bytes by {size:.2f}x, FLOPs not at all ({flops:.2f}x): looking a token up in a "
       "smaller table costs the same.")

# Recorded by `compress run prune-vocab` (teacher, dataset, --vocab-from) -> tokens kept. Used only for that very
# pair, and only when the count cannot be made again here (the dataset is not in this machine's cache).
RECORDED_KEPT = {("minilm", "mr", "train"): 12_793}


@dataclass(frozen=True)
class KeptTokens:
    """How many tokens vocabulary pruning would keep, and where that number comes from (one phrase)."""

    count: int | None       # None: not known on this machine
    source: str


def kept_tokens(teacher: str, vocab_from: str = "train", dataset: str | None = None) -> KeptTokens:
    """The tokens of ``dataset`` (default: the default dataset) under ``teacher``'s tokenizer, counted as the run
    counts them, when both are on this machine (nothing is downloaded); else the count recorded for that very
    pair; else unknown."""
    from compress.data.named import DEFAULT_DATASET, NAMED_DATASETS

    dataset = dataset or DEFAULT_DATASET
    texts = "training split" if vocab_from == "train" else "splits"
    tokenizer = _local_tokenizer(teacher)
    named = NAMED_DATASETS.get(dataset)
    cached = named is None or named.is_cached()
    if tokenizer is not None and cached:
        from compress.data.load import load_task
        from compress.methods.prune_vocab.verb import vocab_texts
        from compress.prune.vocab import used_token_ids

        count = len(used_token_ids(tokenizer, *vocab_texts(load_task(dataset), vocab_from)))
        return KeptTokens(count, f"counted now: the tokens used in {dataset}'s {texts} under {teacher}'s tokenizer, "
                                 "as `compress run prune-vocab` counts them")
    fetch = f"not in this machine's cache; `compress data show {dataset}` fetches it"
    recorded = RECORDED_KEPT.get((teacher, dataset, vocab_from))
    if recorded is not None:
        return KeptTokens(recorded, f"recorded by `compress run prune-vocab` for {teacher} on {dataset}'s {texts} "
                                    f"({dataset} is {fetch})")
    missing = [f"{teacher}'s tokenizer (not on this machine)"] if tokenizer is None else []
    missing += [] if cached else [f"{dataset} ({fetch})"]
    return KeptTokens(None, f"not known here: counting needs {' and '.join(missing)}")


def _local_tokenizer(teacher: str) -> Any | None:
    """The teacher's tokenizer if it is on this machine (bundled, a local directory or the hub cache), else None."""
    from compress.teachers.registry import TEACHERS, load_tokenizer, saved_tokenizer

    spec = TEACHERS.get(teacher)
    hub = spec.location if spec is not None and spec.source == "hub" else None
    if spec is None and not Path(teacher).expanduser().exists():
        hub = teacher  # a hub id: explain never downloads
    try:
        if hub is None:
            return load_tokenizer(teacher)
        from huggingface_hub import snapshot_download

        from compress.models.checkpoints import TOKENIZER_FILES

        cached = snapshot_download(hub, allow_patterns=list(TOKENIZER_FILES), local_files_only=True)
        return saved_tokenizer(Path(cached))
    except Exception:  # noqa: BLE001 - not on this machine (huggingface_hub's "not cached" errors among them)
        return None


def explain(name: str, tc: EncoderConfig, seq_len: int, options: Any = None) -> Explanation:
    from compress.reports.footprint import footprint, side_by_side

    vocab_from = getattr(options, "vocab_from", "train")
    kept = kept_tokens(name, vocab_from)
    v_new = min(kept.count, tc.vocab_size) if kept.count is not None else tc.vocab_size
    sc = tc.replace(vocab_size=v_new)
    teacher, student = footprint(tc, seq_len), footprint(sc, seq_len)
    e = tc.embedding_size
    after = f"V' x E = {v_new:,} x {e} = {v_new * e:,}" if kept.count is not None else "V' x E"
    formula = [
        f"token embeddings: V x E = {tc.vocab_size:,} x {e} = {tc.vocab_size * e:,}  ->  {after} (V' = the tokens "
        f"the task's text uses under the teacher's tokenizer, special tokens included)",
        f"V' here: {kept.source}",
        "the kept tokens are renumbered 0..V'-1 and a tokenizer with that vocabulary is saved with the model",
    ]
    share = tc.vocab_size * e / teacher.params
    if kept.count is not None:
        cut = (f"The embedding table is {share:.0%} of this teacher's parameters, so cutting it keeps "
               f"{student.params / teacher.params:.0%} of them; FLOPs and speed do not change.")
    else:
        cut = (f"The embedding table is {share:.0%} of this teacher's parameters; without V' the student column "
               "repeats the teacher's. FLOPs and speed do not change.")
    notes = [cut, "V' depends on the dataset and the tokenizer: `compress run prune-vocab` records it for yours.",
             "TextPruner: vocabulary pruning cuts a multilingual model's embedding to the tokens one language uses."]
    out = side_by_side("prune-vocab", name, teacher, student, formula, notes)
    out["kept_tokens"] = {"count": kept.count, "source": kept.source}
    return out


def check(config: RunConfig, options: VocabOptions) -> None:
    from compress.methods.prune_vocab.verb import check_vocab_pruning

    check_vocab_pruning(config, options)


# Tokens kept, by (task fingerprint, tokenizer, vocab_from): a search asks for every candidate that prunes them.
_KEPT: dict[tuple[str, str, str], int] = {}


def shape(options: VocabOptions, tc: EncoderConfig, context: Context) -> EncoderConfig:
    """The shape with the vocabulary of the tokens the task's text uses (the teacher's when the context has no task)."""
    from compress.data.batching import tokenizer_id
    from compress.methods.prune_vocab.verb import vocab_texts
    from compress.prune.vocab import used_token_ids

    if context.task is None or context.tokenizer is None:
        return tc
    key = (context.task.fingerprint, tokenizer_id(context.tokenizer), options.vocab_from)
    if key not in _KEPT:
        _KEPT[key] = len(used_token_ids(context.tokenizer, *vocab_texts(context.task, options.vocab_from)))
    return tc.replace(vocab_size=_KEPT[key])


def apply(model: Encoder, options: VocabOptions, context: Context) -> Transformed:
    from compress.methods.prune_vocab.verb import apply as prune_vocabulary

    return prune_vocabulary(model, options, context)


METHOD = register(Transform(
    name="prune-vocab", rank=95, family="pruning", label="vocabulary pruning",
    summary="the token-embedding rows of the tokens the training text uses, renumbered",
    options=VocabOptions, why=WHY, explain=explain, takes="fp32", gives="fp32", run_kind="pruning", seeded=False,
    details=VocabDetails, summary_lines=summary_lines, report_lines=report_lines, check=check, apply=apply,
    shape=shape,
))
