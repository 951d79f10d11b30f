"""Vocabulary pruning (TextPruner): keep the token-embedding rows of the tokens the task's text uses.

Engines: :mod:`compress.prune.vocab` (ids, the smaller table, the renumbered tokenizer) and
:mod:`compress.runs.vocab_pruning` (the run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from compress.methods.registry import Transform, register
from compress.models.config import EncoderConfig
from compress.prune.options import VocabOptions

# What trains, measures or explains (torch) is imported in the functions that do it: the registry loads
# every method module for `compress --help`, which needs only names, options and sentences.
if TYPE_CHECKING:
    from compress.runs.config import RunConfig, RunResult

WHY = ("Vocabulary pruning shrinks the token-embedding table to the tokens the task uses: parameters fall by "
       "{params:.2f}x and bytes by {size:.2f}x, FLOPs not at all ({flops:.2f}x): looking a token up in a "
       "smaller table costs the same.")

# MR's training split uses 12,793 of minilm's 30,522 tokens (measured by `compress run prune-vocab`).
ILLUSTRATION_KEPT = 12_793


def explain(name: str, tc: EncoderConfig, seq_len: int, options: Any = None) -> dict[str, Any]:
    from compress.reports.footprint import footprint, side_by_side

    kept = min(ILLUSTRATION_KEPT, tc.vocab_size)
    sc = tc.replace(vocab_size=kept)
    teacher, student = footprint(tc, seq_len), footprint(sc, seq_len)
    e = tc.embedding_size
    formula = [
        f"token embeddings: V x E = {tc.vocab_size:,} x {e} = {tc.vocab_size * e:,}  ->  V' x E = {kept:,} x {e} "
        f"= {kept * e:,} (V' = the tokens the task's training text uses, here MR's with minilm's tokenizer)",
        "the kept tokens are renumbered 0..V'-1 and a tokenizer with that vocabulary is saved with the model",
    ]
    notes = [
        f"The embedding table is {tc.vocab_size * e / teacher.params:.0%} of this teacher's parameters, so "
        f"cutting it keeps {student.params / teacher.params:.0%} of them; FLOPs and speed do not change.",
        "TextPruner: vocabulary pruning cuts a multilingual model's embedding to the tokens one language uses.",
    ]
    return side_by_side("prune-vocab", name, teacher, student, formula, notes)


def check(config: RunConfig, options: VocabOptions) -> None:
    from compress.runs.vocab_pruning import check_vocab_pruning

    check_vocab_pruning(config, options)


def run(config: RunConfig, options: VocabOptions, show_progress: bool = True, pipeline: str | None = None) -> RunResult:
    from compress.runs.vocab_pruning import vocab_prune_run

    return vocab_prune_run(config, options, show_progress, pipeline)


METHOD = register(Transform(
    name="prune-vocab", rank=95, family="pruning", label="vocabulary pruning",
    summary="the token-embedding rows of the tokens the training text uses, renumbered",
    options=VocabOptions, why=WHY, explain=explain, takes="fp32", gives="fp32",
    check=check, run=run,
))
